//===- EmuCompare.h - one module on both targets, results compared -*- C++ -*-===//
//
// Shared by the tests of bt-cuda-emu-kernel-tests (EmuKernelTest.cpp: the
// forward layer-level ops and the attention kernels; EmuBackwardTest.cpp:
// the backward and optimizer ops). A layer-level module is compiled for
// the CPU target (bt-cpu-pipeline, the reference) and for the CUDA target
// (bt-cuda-pipeline with the emulator's kernel library), and one function
// of it is called on both with the same host inputs (KernelHarness.h);
// the emulated device is EmuDevice.h.
//
//===----------------------------------------------------------------------===//

#ifndef BT_TEST_UNIT_CUDA_EMU_EMUCOMPARE_H
#define BT_TEST_UNIT_CUDA_EMU_EMUCOMPARE_H

#include "../codegen/KernelHarness.h"

#include "mlir/IR/MLIRContext.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace bt::test {

/// A module compiled for both targets.
struct BothTargets {
  std::unique_ptr<Kernels> cpu, gpu;
  std::string emulatorImage;
};

/// An MLIR context with the CUDA target's dialects (a superset of the CPU
/// target's) loaded.
std::unique_ptr<mlir::MLIRContext> makeCUDAContext();

/// Compiles `source` (layer-level bt IR) for both targets and opens the
/// emulated device; null with `error` set on failure.
std::unique_ptr<BothTargets> compileBoth(const std::string &source,
                                         std::string &error);

/// How expectSame compares.
struct CompareOptions {
  /// |gpu − cpu| ≤ tol + tol · |cpu| elementwise (f32 results).
  double tol = 1e-5;
  /// Schedule seeds (emu::setScheduleSeed) run after the in-order run
  /// (seed 0); each must give results bit-identical to it.
  std::vector<unsigned long long> seeds = {1, 2, 3};
};

/// Calls `name` on both targets with `args` and compares every result: f32
/// within `options.tol` of the CPU target and finite, integers equal; no
/// report of the emulator; the runs with `options.seeds` bit-identical to
/// the in-order run. `what` names the case in failure messages.
void expectSame(BothTargets &both, const std::string &name,
                const std::vector<const Array *> &args,
                const std::vector<ResultSpec> &results,
                const std::string &what, const CompareOptions &options = {});

/// Key flags [batch, keys] of attention tests, by sequence b % 3: 0 random
/// (80 % valid) with the first three keys masked, 1 none valid (fully
/// masked rows), 2 all valid.
std::vector<int64_t> keyFlags(int64_t batch, int64_t keys, std::mt19937 &rng);

/// Ids of `shape` uniform in [0, vocab) (i32 when `i32`, else i64).
Array randomIds(std::vector<int64_t> shape, int64_t vocab, bool i32,
                std::mt19937 &rng);

} // namespace bt::test

#endif // BT_TEST_UNIT_CUDA_EMU_EMUCOMPARE_H
