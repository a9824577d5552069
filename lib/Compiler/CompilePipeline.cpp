//===- CompilePipeline.cpp - bt-compile-pipeline --------------------------===//
//
// The compile phases of Compiler.h as one registered pass pipeline, for
// bt-opt: `bt-compile-pipeline{target=cpu|cuda compile-to=model|layer|
// linalg|llvm ...}` on an imported model (e.g. examples/block_tiny.mlir)
// runs the phases up to and including `compile-to`, as `bt-run compile`
// does before its output.
//
//===----------------------------------------------------------------------===//

#include "bt/Compiler/Compiler.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace bt::compiler;

namespace {

struct CompilePipelineOptions
    : public PassPipelineOptions<CompilePipelineOptions> {
  Option<Target> target{
      *this, "target", llvm::cl::desc("What the kernels are compiled for"),
      llvm::cl::init(Target::CPU),
      llvm::cl::values(clEnumValN(Target::CPU, "cpu", "the CPU (OpenBLAS)"),
                       clEnumValN(Target::CUDA, "cuda",
                                  "NVIDIA GPUs (PTX, cuBLAS)"))};
  Option<Phase> compileTo{
      *this, "compile-to",
      llvm::cl::desc("The last phase run (Compiler.h)"),
      llvm::cl::init(Phase::LLVM),
      llvm::cl::values(
          clEnumValN(Phase::Model, "model",
                     "model-level bt IR with the entry points"),
          clEnumValN(Phase::Layer, "layer", "layer-level bt IR"),
          clEnumValN(Phase::Linalg, "linalg",
                     "linalg on tensors, final entry-point signatures"),
          clEnumValN(Phase::LLVM, "llvm", "LLVM-dialect host code"))};
  Option<bool> gradEntry{*this, "grad-entry",
                         llvm::cl::desc("Build the grad entry point "
                                        "(bt-generate-gradients)"),
                         llvm::cl::init(false)};
  Option<bool> trainStep{*this, "train-step",
                         llvm::cl::desc("Build train_step "
                                        "(bt-generate-train-step)"),
                         llvm::cl::init(false)};
  Option<bool> applyGradients{*this, "apply-gradients",
                              llvm::cl::desc("Build apply_gradients "
                                             "(bt-generate-train-step)"),
                              llvm::cl::init(false)};
  Option<bool> fuseLocalAttention{
      *this, "fuse-local-attention",
      llvm::cl::desc("Run bt-fuse-local-attention"), llvm::cl::init(true)};
  Option<bool> blas{*this, "blas",
                    llvm::cl::desc("f32 GEMMs through (cu)BLAS"),
                    llvm::cl::init(true)};
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("cuda: the GPU architecture"),
                           llvm::cl::init("sm_90")};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("cuda: the toolkit of libdevice (empty: the build's)"),
      llvm::cl::init("")};
  Option<bool> binary{*this, "binary",
                      llvm::cl::desc("cuda: the kernels as PTX (false: the "
                                     "NVVM-dialect gpu.module)"),
                      llvm::cl::init(true)};

  Options toOptions() const {
    Options o;
    o.target = target;
    o.gradEntry = gradEntry;
    o.trainStep = trainStep;
    o.applyGradients = applyGradients;
    o.fuseLocalAttention = fuseLocalAttention;
    o.blas = blas;
    o.gpuChip = chip;
    o.cudaPath = cudaPath;
    o.gpuBinary = binary;
    return o;
  }
};

} // namespace

void bt::compiler::registerCompilePipeline() {
  PassPipelineRegistration<CompilePipelineOptions>(
      "bt-compile-pipeline",
      "Compile an imported Block Transformer model up to a phase: model, "
      "layer, linalg or llvm (bt-run compile's phases, "
      "include/bt/Compiler/Compiler.h)",
      [](OpPassManager &pm, const CompilePipelineOptions &pipeline) {
        Options options = pipeline.toOptions();
        for (int p = 0; p <= static_cast<int>(pipeline.compileTo.getValue());
             ++p)
          buildPhasePipeline(pm, static_cast<Phase>(p), options);
      });
}
