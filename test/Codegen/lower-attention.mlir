// RUN: bt-opt %s --bt-lower-to-linalg | FileCheck %s
// RUN: bt-opt %s --bt-lower-to-linalg=fused-kernel=false | FileCheck %s --check-prefix=CHAIN

// Causal attention, HF GPT-NeoX eager numerics:
//   v = where(t <= s, (q·k)·scale, MIN) + (1 - key_mask)·MIN   (MIN = finfo(f32).min)
//   p = exp(v - max_t v) · (1 / Σ_t exp(v - max_t v));  out = p · v
// One scf.for over the B·H heads: strided [S, hd] slices of q, k, v (no
// transposes), one [S, S] score buffer updated in place, the [S, hd] result
// written into the output slice; marked bt.independent_iterations (each head
// writes its own slice), which the CPU pipeline runs as a parallel loop.

// CHECK-DAG: #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[COL:.*]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[ROW:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-DAG: #[[ROWS:.*]] = affine_map<(d0)[s0] -> (64, -d0 + s0)>

// CHECK-LABEL: func.func @attention
//  CHECK-SAME:   %[[Q:.*]]: tensor<?x7x2x8xf32>, %[[K:.*]]: tensor<?x7x2x8xf32>, %[[V:.*]]: tensor<?x7x2x8xf32>, %[[M:.*]]: tensor<?x7xi64>
//   CHECK-DAG:   %[[LO:.*]] = arith.constant -1.040000e+02 : f32
//   CHECK-DAG:   %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
//   CHECK-DAG:   %[[MIN:.*]] = arith.constant -3.40282347E+38 : f32
//   CHECK-DAG:   %[[SCALE:.*]] = arith.constant 0.353553385 : f32
//   CHECK-DAG:   %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
//   CHECK-DAG:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
//   CHECK-DAG:   %[[H:.*]] = arith.constant 2 : index
//       CHECK:   %[[B:.*]] = tensor.dim %[[Q]]
//       CHECK:   %[[G:.*]] = arith.muli %[[B]], %[[H]] : index
//       CHECK:   %[[OUT:.*]] = tensor.empty(%[[B]]) : tensor<?x7x2x8xf32>
//       CHECK:   %[[R:.*]] = scf.for %[[I:[^ ]*]] = %{{.*}} to %[[G]] step %{{.*}} iter_args(%[[ACC:.*]] = %[[OUT]]) -> (tensor<?x7x2x8xf32>) {
//       CHECK:     %[[HI:.*]] = arith.remui %[[I]], %[[H]] : index
//       CHECK:     %[[BI:.*]] = arith.divui %[[I]], %[[H]] : index
//       CHECK:     %[[QH:.*]] = tensor.extract_slice %[[Q]][%[[BI]], 0, %[[HI]], 0] [1, 7, 1, 8] [1, 1, 1, 1] : tensor<?x7x2x8xf32> to tensor<7x8xf32>
//       CHECK:     %[[KH:.*]] = tensor.extract_slice %[[K]][%[[BI]], 0, %[[HI]], 0] [1, 7, 1, 8]
//       CHECK:     %[[VH:.*]] = tensor.extract_slice %[[V]][%[[BI]], 0, %[[HI]], 0] [1, 7, 1, 8]
//       CHECK:     %[[S0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<7x7xf32>)
//       CHECK:     %[[S:.*]] = linalg.matmul_transpose_b ins(%[[QH]], %[[KH]] : tensor<7x8xf32>, tensor<7x8xf32>) outs(%[[S0]] : tensor<7x7xf32>)
//       CHECK:     %[[MR:.*]] = tensor.extract_slice %[[M]][%[[BI]], 0] [1, 7] [1, 1] : tensor<?x7xi64> to tensor<7xi64>
//       CHECK:     %[[MAXINIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32)
//       CHECK:     %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[ID2]], #[[COL]], #[[ROW]]], iterator_types = ["parallel", "reduction"]} ins(%[[S]], %[[MR]] : tensor<7x7xf32>, tensor<7xi64>) outs(%[[MAXINIT]] : tensor<7xf32>)
//       CHECK:       %[[X:.*]] = arith.mulf %{{.*}}, %[[SCALE]]
//       CHECK:       %[[QI:.*]] = linalg.index 0 : index
//       CHECK:       %[[KI:.*]] = linalg.index 1 : index
//       CHECK:       %[[CAUSAL:.*]] = arith.cmpi ule, %[[KI]], %[[QI]] : index
//       CHECK:       %[[W:.*]] = arith.select %[[CAUSAL]], %[[X]], %[[MIN]]
//       CHECK:       %[[MF:.*]] = arith.sitofp %{{.*}} : i64 to f32
//       CHECK:       %[[INV:.*]] = arith.subf %[[ONE]], %[[MF]]
//       CHECK:       %[[ADD:.*]] = arith.mulf %[[INV]], %[[MIN]]
//       CHECK:       %[[MASKED:.*]] = arith.addf %[[W]], %[[ADD]]
//       CHECK:       arith.maximumf %{{.*}}, %[[MASKED]]
// The exponentials overwrite the scores; below -104 exp is exactly 0 (Sleef).
//       CHECK:     %[[E:.*]] = linalg.generic {indexing_maps = [#[[COL]], #[[ROW]], #[[ID2]]], iterator_types = ["parallel", "parallel"]} ins(%[[MR]], %[[MAX]] : tensor<7xi64>, tensor<7xf32>) outs(%[[S]] : tensor<7x7xf32>)
//       CHECK:       %[[UNDER:.*]] = arith.cmpf olt, %[[D:.*]], %[[LO]] : f32
//       CHECK:       %[[ARG:.*]] = arith.select %[[UNDER]], %[[ZERO]], %[[D]] : f32
//       CHECK:       %[[EXP:.*]] = math.exp %[[ARG]] : f32
//       CHECK:       arith.select %[[UNDER]], %[[ZERO]], %[[EXP]] : f32
//       CHECK:     %[[SUM:.*]] = linalg.generic {{.*}}["parallel", "reduction"]{{.*}} ins(%[[E]] :
//       CHECK:     %[[RINV:.*]] = linalg.generic {{.*}} ins(%[[SUM]] :
//       CHECK:       arith.divf %[[ONE]]
//       CHECK:     %[[P:.*]] = linalg.generic {{.*}} ins(%[[RINV]] : tensor<7xf32>) outs(%[[E]] : tensor<7x7xf32>)
//       CHECK:     %[[OS:.*]] = tensor.extract_slice %[[ACC]][%[[BI]], 0, %[[HI]], 0] [1, 7, 1, 8]
//       CHECK:     %[[O0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[OS]] : tensor<7x8xf32>)
//       CHECK:     %[[O:.*]] = linalg.matmul ins(%[[P]], %[[VH]] : tensor<7x7xf32>, tensor<7x8xf32>) outs(%[[O0]] : tensor<7x8xf32>)
//       CHECK:     %[[UPD:.*]] = tensor.insert_slice %[[O]] into %[[ACC]][%[[BI]], 0, %[[HI]], 0] [1, 7, 1, 8]
//       CHECK:     scf.yield %[[UPD]]
//       CHECK:   } {bt.independent_iterations}
//       CHECK:   return %[[R]]
func.func @attention(%q: tensor<?x7x2x8xf32>, %k: tensor<?x7x2x8xf32>, %v: tensor<?x7x2x8xf32>, %m: tensor<?x7xi64>) -> tensor<?x7x2x8xf32> {
  %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x7x2x8xf32>, tensor<?x7xi64> -> tensor<?x7x2x8xf32>
  return %o : tensor<?x7x2x8xf32>
}

// Block-local attention: [B, N_blk, S, H, hd] with an i1 key mask
// [B, N_blk, S]; the loop index is delinearized into (b, n, h).
// CHECK-LABEL: func.func @local_attention
//       CHECK:   scf.for %[[I:[^ ]*]] =
//       CHECK:     %[[HI:.*]] = arith.remui %[[I]], %{{.*}}
//       CHECK:     %[[R1:.*]] = arith.divui %[[I]], %{{.*}}
//       CHECK:     %[[NI:.*]] = arith.remui %[[R1]], %[[N:.*]] : index
//       CHECK:     %[[BI:.*]] = arith.divui %[[R1]], %[[N]] : index
//       CHECK:     tensor.extract_slice %{{.*}}[%[[BI]], %[[NI]], 0, %[[HI]], 0] [1, 1, 5, 1, 8] [1, 1, 1, 1, 1] : tensor<?x?x5x2x8xf32> to tensor<5x8xf32>
//       CHECK:     linalg.matmul_transpose_b
//       CHECK:     tensor.extract_slice %{{.*}}[%[[BI]], %[[NI]], 0] [1, 1, 5] [1, 1, 1] : tensor<?x?x5xi1> to tensor<5xi1>
//       CHECK:       arith.uitofp %{{.*}} : i1 to f32
//       CHECK:     linalg.matmul
func.func @local_attention(%q: tensor<?x?x5x2x8xf32>, %k: tensor<?x?x5x2x8xf32>, %v: tensor<?x?x5x2x8xf32>, %m: tensor<?x?x5xi1>) -> tensor<?x?x5x2x8xf32> {
  %o = bt.local_attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x?x5x2x8xf32>, tensor<?x?x5xi1> -> tensor<?x?x5x2x8xf32>
  return %o : tensor<?x?x5x2x8xf32>
}

// Without a key mask nothing is added to the causal scores. A dynamic
// sequence (it may exceed 64 rows) goes in chunks of 64 query rows: chunk
// [r0, r0 + rows) with rows = min(64, S - r0) attends to keys [0, r0 + rows)
// only, and its causal test compares key t with row r0 + s.
// CHECK-LABEL: func.func @attention_no_mask
//  CHECK-SAME:   %[[Q:[^:]*]]: tensor<2x?x2x8xf32>, %[[K:[^:]*]]: tensor<2x?x2x8xf32>, %[[V:[^:]*]]: tensor<2x?x2x8xf32>
//   CHECK-DAG:   %[[C64:.*]] = arith.constant 64 : index
//   CHECK-DAG:   %[[C1:.*]] = arith.constant 1 : index
//       CHECK:   %[[S:.*]] = tensor.dim %[[Q]], %[[C1]]
//       CHECK:   scf.for %[[I:[^ ]*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}})
//       CHECK:     %[[HI:.*]] = arith.remui %[[I]]
//       CHECK:     %[[BI:.*]] = arith.divui %[[I]]
//       CHECK:     %[[C:.*]] = scf.for %[[R0:[^ ]*]] = %{{.*}} to %[[S]] step %[[C64]] iter_args(%[[CACC:.*]] = %[[ACC]])
//       CHECK:       %[[N:.*]] = affine.min #[[ROWS]](%[[R0]])[%[[S]]]
//       CHECK:       %[[END:.*]] = arith.addi %[[R0]], %[[N]]
//       CHECK:       %[[QH:.*]] = tensor.extract_slice %[[Q]][%[[BI]], %[[R0]], %[[HI]], 0] [1, %[[N]], 1, 8]
//       CHECK:       %[[KH:.*]] = tensor.extract_slice %[[K]][%[[BI]], 0, %[[HI]], 0] [1, %[[END]], 1, 8]
//       CHECK:       %[[VH:.*]] = tensor.extract_slice %[[V]][%[[BI]], 0, %[[HI]], 0] [1, %[[END]], 1, 8]
//       CHECK:       %[[E:.*]] = tensor.empty(%[[N]], %[[END]]) : tensor<?x?xf32>
//       CHECK:       linalg.matmul_transpose_b ins(%[[QH]], %[[KH]] : tensor<?x8xf32>, tensor<?x8xf32>) {{.*}} -> tensor<?x?xf32>
//       CHECK:       linalg.generic {{.*}} ins(%{{.*}} : tensor<?x?xf32>)
//   CHECK-NOT:         arith.sitofp
//       CHECK:         %[[QI:.*]] = linalg.index 0
//       CHECK:         %[[KI:.*]] = linalg.index 1
//       CHECK:         %[[ROW:.*]] = arith.addi %[[QI]], %[[R0]]
//       CHECK:         arith.cmpi ule, %[[KI]], %[[ROW]]
//       CHECK:         arith.select
//  CHECK-NEXT:         arith.maximumf
//       CHECK:       %[[OS:.*]] = tensor.extract_slice %[[CACC]][%[[BI]], %[[R0]], %[[HI]], 0] [1, %[[N]], 1, 8]
//       CHECK:       %[[O0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[OS]] : tensor<?x8xf32>)
//       CHECK:       %[[O:.*]] = linalg.matmul ins(%{{.*}}, %[[VH]] : tensor<?x?xf32>, tensor<?x8xf32>) outs(%[[O0]] : tensor<?x8xf32>)
//       CHECK:       %[[UPD:.*]] = tensor.insert_slice %[[O]] into %[[CACC]][%[[BI]], %[[R0]], %[[HI]], 0] [1, %[[N]], 1, 8]
//       CHECK:       scf.yield %[[UPD]]
//       CHECK:     scf.yield %[[C]]
//       CHECK:   } {bt.independent_iterations}
func.func @attention_no_mask(%q: tensor<2x?x2x8xf32>, %k: tensor<2x?x2x8xf32>, %v: tensor<2x?x2x8xf32>) -> tensor<2x?x2x8xf32> {
  %o = bt.attention %q, %k, %v scale 0.35355339059327373 : tensor<2x?x2x8xf32> -> tensor<2x?x2x8xf32>
  return %o : tensor<2x?x2x8xf32>
}

// With a key mask and chunks, each head first finds the first valid key of
// its mask row (S when none): a chunk whose first row r0 comes before it
// (a row without any valid causal key, which HF spreads over every key of
// score MIN, the valid non-causal ones included) keeps all S keys.
// CHECK-LABEL: func.func @attention_chunked_mask
//  CHECK-SAME:   %[[M:[^:]*]]: tensor<?x?xi64>
//       CHECK:   %[[S:[^ ]*]] = tensor.dim %{{[^,]*}}, %c1
//       CHECK:   scf.for %[[I:[^ ]*]] =
//       CHECK:     %[[BI:.*]] = arith.divui %[[I]]
//       CHECK:     %[[MR:.*]] = tensor.extract_slice %[[M]][%[[BI]], 0] [1, %[[S]]] [1, 1] : tensor<?x?xi64> to tensor<?xi64>
//       CHECK:     %[[NONE:.*]] = linalg.fill ins(%[[S]] : index) outs(%{{.*}} : tensor<index>)
//       CHECK:     %[[FIRST:.*]] = linalg.generic {{.*}}iterator_types = ["reduction"]} ins(%[[MR]] : tensor<?xi64>) outs(%[[NONE]] : tensor<index>)
//       CHECK:       %[[VALID:.*]] = arith.cmpi ne, %{{.*}}, %{{.*}} : i64
//       CHECK:       %[[T:.*]] = linalg.index 0
//       CHECK:       %[[CAND:.*]] = arith.select %[[VALID]], %[[T]], %[[OUT:.*]] : index
//       CHECK:       arith.minui %[[OUT]], %[[CAND]]
//       CHECK:     %[[F:.*]] = tensor.extract %[[FIRST]][]
//       CHECK:     scf.for %[[R0:[^ ]*]] =
//       CHECK:       %[[N:.*]] = affine.min
//       CHECK:       %[[END:.*]] = arith.addi %[[R0]], %[[N]]
//       CHECK:       %[[BLIND:.*]] = arith.cmpi ult, %[[R0]], %[[F]]
//       CHECK:       %[[KEYS:.*]] = arith.select %[[BLIND]], %[[S]], %[[END]]
//       CHECK:       tensor.extract_slice %{{.*}} [1, %[[KEYS]], 1, 8]
//       CHECK:       tensor.extract_slice %[[M]][%[[BI]], 0] [1, %[[KEYS]]]
func.func @attention_chunked_mask(%q: tensor<?x?x2x8xf32>, %k: tensor<?x?x2x8xf32>, %v: tensor<?x?x2x8xf32>, %m: tensor<?x?xi64>) -> tensor<?x?x2x8xf32> {
  %o = bt.attention %q, %k, %v key_mask %m scale 0.35355339059327373 : tensor<?x?x2x8xf32>, tensor<?x?xi64> -> tensor<?x?x2x8xf32>
  return %o : tensor<?x?x2x8xf32>
}

// The fused op is one kernel: one loop over the B·N_blk·H heads; per head the
// q, k, v rows are views of the QKV projection (no split copies), q and k are
// copied into [S, hd] stack buffers and rotated in place (one shared cos/sin
// table), the scores and row statistics use stack buffers too; only the
// [S, hd] result is written to the output.
// CHECK-LABEL: func.func @fused_local_attention
//       CHECK:   %[[SUM:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6xf32>
//       CHECK:   %[[MAX:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6xf32>
//       CHECK:   %[[SC:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6x6xf32>
//       CHECK:   %[[KB:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6x8xf32>
//       CHECK:   %[[QB:.*]] = memref.alloca() {alignment = 64 : i64} : memref<6x8xf32>
//       CHECK:   %[[T:.*]]:2 = linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : tensor<6x2xf32>, tensor<6x2xf32>)
//       CHECK:   %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2], [3, 4, 5]] output_shape [%{{.*}}, 2, 6, 2, 3, 8]
//       CHECK:   scf.for %[[I:[^ ]*]] = {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<?x2x6x2x8xf32>) {
//       CHECK:     %[[HI:.*]] = arith.remui %[[I]]
//       CHECK:     %[[R:.*]] = arith.divui %[[I]]
//       CHECK:     %[[NI:.*]] = arith.remui %[[R]]
//       CHECK:     %[[BI:.*]] = arith.divui %[[R]]
//       CHECK:     %[[QT:.*]] = bufferization.to_tensor %[[QB]] restrict writable : memref<6x8xf32>
//       CHECK:     %[[QV:.*]] = tensor.extract_slice %[[E]][%[[BI]], %[[NI]], 0, %[[HI]], 0, 0] [1, 1, 6, 1, 1, 8] [1, 1, 1, 1, 1, 1] : tensor<?x2x6x2x3x8xf32> to tensor<6x8xf32>
//       CHECK:     %[[QC:.*]] = linalg.copy ins(%[[QV]] : tensor<6x8xf32>) outs(%[[QT]] : tensor<6x8xf32>)
//       CHECK:     %[[QR:.*]] = linalg.generic {{.*}} ins(%[[QV]], %[[T]]#0, %[[T]]#1 : tensor<6x8xf32>, tensor<6x2xf32>, tensor<6x2xf32>) outs(%[[QC]] : tensor<6x8xf32>)
//       CHECK:     %[[KT:.*]] = bufferization.to_tensor %[[KB]] restrict writable
//       CHECK:     %[[KV:.*]] = tensor.extract_slice %[[E]][%[[BI]], %[[NI]], 0, %[[HI]], 1, 0]
//       CHECK:     %[[KC:.*]] = linalg.copy ins(%[[KV]] : tensor<6x8xf32>) outs(%[[KT]] : tensor<6x8xf32>)
//       CHECK:     %[[KR:.*]] = linalg.generic {{.*}} outs(%[[KC]] : tensor<6x8xf32>)
//       CHECK:     %[[VV:.*]] = tensor.extract_slice %[[E]][%[[BI]], %[[NI]], 0, %[[HI]], 2, 0]
//       CHECK:     %[[SCT:.*]] = bufferization.to_tensor %[[SC]] restrict writable : memref<6x6xf32>
//       CHECK:     %[[S0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[SCT]] : tensor<6x6xf32>)
//       CHECK:     %[[S:.*]] = linalg.matmul_transpose_b ins(%[[QR]], %[[KR]] : tensor<6x8xf32>, tensor<6x8xf32>) outs(%[[S0]] : tensor<6x6xf32>)
//       CHECK:       math.exp
// The reciprocal of the row sums overwrites them.
//       CHECK:     %[[RS:.*]] = linalg.generic {{.*}}["parallel", "reduction"]{{.*}} outs(%{{.*}} : tensor<6xf32>)
//       CHECK:     %[[RINV:.*]] = linalg.generic {{.*}}iterator_types = ["parallel"]} outs(%[[RS]] : tensor<6xf32>)
//       CHECK:       arith.divf
//       CHECK:     %[[P:.*]] = linalg.generic {{.*}} ins(%[[RINV]] : tensor<6xf32>)
//       CHECK:     %[[OS:.*]] = tensor.extract_slice %[[ACC]][%[[BI]], %[[NI]], 0, %[[HI]], 0] [1, 1, 6, 1, 8]
//       CHECK:     %[[O0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[OS]] : tensor<6x8xf32>)
//       CHECK:     %[[O:.*]] = linalg.matmul ins(%[[P]], %[[VV]] : tensor<6x6xf32>, tensor<6x8xf32>) outs(%[[O0]] : tensor<6x8xf32>)
//       CHECK:     tensor.insert_slice %[[O]] into %[[ACC]][%[[BI]], %[[NI]], 0, %[[HI]], 0] [1, 1, 6, 1, 8]
//   CHECK-NOT:   math.cos
//       CHECK:   return
// With fused-kernel=false: the unfused chain (split views, one shared
// cos/sin table for q and k, then the local attention).
// CHAIN-LABEL: func.func @fused_local_attention
//   CHAIN-NOT:   memref.alloca
//       CHAIN:   %[[T:.*]]:2 = linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : tensor<6x2xf32>, tensor<6x2xf32>)
//       CHAIN:   %[[E:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2], [3, 4, 5]] output_shape [%{{.*}}, 2, 6, 2, 3, 8]
//       CHAIN:   tensor.extract_slice %[[E]][0, 0, 0, 0, 0, 0]
//       CHAIN:   tensor.extract_slice %[[E]][0, 0, 0, 0, 1, 0]
//       CHAIN:   tensor.extract_slice %[[E]][0, 0, 0, 0, 2, 0]
//       CHAIN:   linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[T]]#0, %[[T]]#1 :
//       CHAIN:   linalg.generic {{.*}} ins(%{{.*}}, %{{.*}}, %[[T]]#0, %[[T]]#1 :
//       CHAIN:   scf.for
//       CHAIN:     linalg.matmul_transpose_b
//       CHAIN:     linalg.matmul
func.func @fused_local_attention(%qkv: tensor<?x2x6x48xf32>, %p: tensor<6xi64>) -> tensor<?x2x6x2x8xf32> {
  %o = bt.fused_local_attention %qkv, %p heads 2 head_dim 8 rotary_dims 4 base 10000.0 scale 0.35355339059327373 : tensor<?x2x6x48xf32>, tensor<6xi64> -> tensor<?x2x6x2x8xf32>
  return %o : tensor<?x2x6x2x8xf32>
}
