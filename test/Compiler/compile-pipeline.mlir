// RUN: bt-opt %bt_src_root/examples/block_tiny.mlir --bt-compile-pipeline="compile-to=model" | FileCheck %s --check-prefix=MODEL
// RUN: bt-opt %bt_src_root/examples/block_tiny.mlir --bt-compile-pipeline="compile-to=layer" | FileCheck %s --check-prefix=LAYER
// RUN: bt-opt %bt_src_root/examples/block_tiny.mlir --bt-compile-pipeline="compile-to=linalg" | FileCheck %s --check-prefix=LINALG
// RUN: bt-opt %bt_src_root/examples/block_tiny.mlir --bt-compile-pipeline="target=cuda compile-to=linalg" | FileCheck %s --check-prefix=CUDA
// RUN: not bt-opt %bt_src_root/examples/block_tiny.mlir --bt-compile-pipeline="compile-to=bogus" 2>&1 | FileCheck %s --check-prefix=BAD

// bt-compile-pipeline: the compile phases of include/bt/Compiler/Compiler.h
// (bt-run compile's) as one registered pipeline of bt-opt, run up to
// `compile-to` on an imported model (examples/block_tiny.mlir). The passes of
// each phase have their own tests; this checks what each phase leaves.

// Phase model: the generation entry points exist, the model ops are kept.
// MODEL-LABEL: func.func @prefill(
//       MODEL:   bt.block_decoder
// MODEL-LABEL: func.func @decode_block(
// MODEL-LABEL: func.func @decode_tokens(

// Phase layer: bt-decompose ran, no model-level op is left.
// LAYER-LABEL: func.func @prefill(
//   LAYER-NOT:   bt.block_decoder
//   LAYER-NOT:   bt.token_decoder
//   LAYER-NOT:   bt.embedder

// Phase linalg: weights are leading arguments (bt.param), KV caches are
// in-out tensors (bt.inout), only bt.sample remains of the bt ops, and the
// CPU target has no GPU kernel.
// LINALG-LABEL: func.func @decode_block(%arg0: tensor<64xf32> {bt.param = "block_decoder.gpt_neox.final_layer_norm.bias"
//  LINALG-SAME:   bt.inout
//  LINALG-SAME:   bt.name = "kv_cache"
//   LINALG-NOT:   gpu.launch

// On the CUDA target the attention becomes the target's kernels.
// CUDA-LABEL: func.func @eval(
//       CUDA:   gpu.launch

// BAD: Cannot find option named 'bogus'
