//===- KernelHarness.h - compile bt IR and call it through the kernel ABI -===//
//
// Test support for bt-codegen-tests: parses a module, runs bt-cpu-pipeline and
// compileToSharedObject, loads the shared object from memory (memfd + dlopen,
// as the runtime does) and calls `bt_entry_<name>(void **argv)` with memref
// descriptors built here (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef BT_TEST_UNIT_CODEGEN_KERNELHARNESS_H
#define BT_TEST_UNIT_CODEGEN_KERNELHARNESS_H

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/CUDA/CUDACodegen.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace bt::test {

enum class DType { F32, I64, I32, I1 };

/// A dense row-major host tensor.
struct Array {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<float> f;   // F32
  std::vector<int64_t> i; // I64 / I32 (stored widened)
  // Raw storage handed to the kernel (I32 / I1 narrowed).
  mutable std::vector<int32_t> i32;
  mutable std::vector<uint8_t> i1;

  int64_t numel() const;
  void *data() const;

  static Array f32(std::vector<int64_t> shape, std::vector<float> values);
  static Array i64(std::vector<int64_t> shape, std::vector<int64_t> values);
  static Array i32v(std::vector<int64_t> shape, std::vector<int64_t> values);
  /// i1 tensors are passed as one byte per element.
  static Array i1v(std::vector<int64_t> shape, std::vector<int64_t> values);
  static Array random(std::vector<int64_t> shape, std::mt19937 &rng,
                      float lo = -1.0f, float hi = 1.0f);
};

/// The layout of one result: its rank and element type.
struct ResultSpec {
  unsigned rank;
  DType dtype = DType::F32;
};

/// A result as returned by the kernel, with the raw descriptor fields.
struct Result {
  Array value;            // copied out densely (honoring strides)
  // Descriptor pointers as numbers: the buffer is freed after the copy.
  uintptr_t allocated = 0;
  uintptr_t aligned = 0;
  int64_t offset = 0;
  std::vector<int64_t> strides;
};

/// Device memory for Kernels::call on a CUDA-target kernel library (the
/// host code's descriptors point to device memory, docs/abi.md "Kernel
/// library (CUDA target)"): null members are not allowed, except invoke.
struct DeviceMemory {
  /// A device buffer of `bytes` (> 0) holding a copy of `host`.
  void *(*upload)(const void *host, int64_t bytes);
  /// Copies `bytes` of device memory at `device` to `host`.
  void (*download)(void *host, const void *device, int64_t bytes);
  /// Releases an uploaded argument or an output (bt_gpu_free).
  void (*release)(void *device);
  /// When set, runs the host code instead of calling it directly (e.g.
  /// captured into a CUDA graph and replayed); the outputs are then the
  /// invoker's, and Kernels::call does not release them.
  void (*invoke)(void (*entry)(void **), void **argv) = nullptr;
};

/// A compiled and loaded kernel library.
class Kernels {
public:
  ~Kernels();
  /// Compiles `source` (layer-level bt IR) with `options`. On failure returns
  /// null and sets `error` (diagnostics, linker output).
  static std::unique_ptr<Kernels> compile(const std::string &source,
                                          const CPUPipelineOptions &options,
                                          std::string &error);
  /// Compiles a layer-level `module` (the caller owns its context; the
  /// module is lowered in place).
  static std::unique_ptr<Kernels> compileModule(mlir::ModuleOp module,
                                                const CPUPipelineOptions &options,
                                                std::string &error);
  /// Compiles a layer-level `module` for the CUDA target
  /// (runCUDAPipeline, takePTX): loads the host shared object and returns
  /// the PTX in `ptx`. The host code calls the GPU ABI (bt_gpu_*, docs/abi.md),
  /// which the loading process must define. With `emulatorImage`, also the
  /// CUDA emulator's kernel library (buildEmulatorKernels compiled by
  /// compileToSharedObject: the artifact's cuda_emu section).
  static std::unique_ptr<Kernels>
  compileCUDAModule(mlir::ModuleOp module, const CUDAPipelineOptions &options,
                    std::string &ptx, std::string &error,
                    std::string *emulatorImage = nullptr);
  /// Calls bt_entry_<name> with dense descriptors of `args`; frees the
  /// results after copying them out. With `device` (a CUDA-target library),
  /// the arguments are uploaded to device buffers first (released after
  /// the call) and the results downloaded.
  std::vector<Result> call(const std::string &name,
                           const std::vector<const Array *> &args,
                           const std::vector<ResultSpec> &results,
                           const DeviceMemory *device = nullptr) const;
  void *symbol(const std::string &name) const;
  /// The `bt.params` order of entry point `name` (empty if none).
  std::vector<std::string> params(const std::string &name) const;
  const std::string &sharedObject() const { return so; }

private:
  /// Compiles a module in the LLVM dialect to a shared object and loads it.
  static std::unique_ptr<Kernels> loadLowered(mlir::ModuleOp module,
                                              std::string &error);
  void *handle = nullptr;
  int fd = -1;
  std::string so;
  std::vector<std::pair<std::string, std::vector<std::string>>> paramOrder;
  /// Per entry: whether each argument of its C interface (results first) is
  /// a scalar passed by value (bt.host_scalar): call() passes it in host
  /// memory, never uploaded.
  std::vector<std::pair<std::string, std::vector<bool>>> hostScalars;
};

/// Reads every tensor of a safetensors file (F32 / I64); false on error.
bool loadSafetensors(const std::string &path, std::vector<std::pair<std::string, Array>> &out,
                     std::string &error);

/// |a - b| <= atol + rtol * |b| elementwise; returns a message for the first
/// few mismatches (empty when all close).
std::string compareClose(const std::vector<float> &actual,
                         const std::vector<double> &expected, double rtol,
                         double atol);

} // namespace bt::test

#endif // BT_TEST_UNIT_CODEGEN_KERNELHARNESS_H
