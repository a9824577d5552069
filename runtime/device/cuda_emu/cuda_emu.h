//===- cuda_emu.h - the emulated CUDA device ---------------------*- C++ -*-===//
//
// An emulated CUDA device (docs/cuda-emulator.md): the subset of the CUDA
// driver API and of cuBLAS that the runtime's CudaBackend loads
// (runtime/src/cuda.cc), implemented on the CPU. It runs the kernels of a
// CUDA-target artifact as the host code that `bt-nvvm-to-host` made of them
// (the artifact's cuda_emu section, a shared object: the "module image" that
// cuModuleLoadDataEx receives instead of PTX) with one fiber per GPU thread,
// and checks what compute-sanitizer's memcheck, racecheck, synccheck and
// initcheck would: every report goes to stderr and fails the call
// (CUDA_ERROR_ILLEGAL_ADDRESS / CUDA_ERROR_LAUNCH_FAILED /
// CUBLAS_STATUS_INVALID_VALUE), which the runtime turns into a non-zero exit.
//
//   void *fn = bt::cuda_emu::LookupSymbol("cuLaunchKernel");  // as dlsym
//
// Environment: BT_CUDA_EMU_SEED (default 0: blocks and threads in order;
// otherwise a permutation of both drawn from the seed; correct kernels give
// bit-identical results for every seed), BT_CUDA_EMU_MAX_REPORTS (default
// 20 printed reports; all are counted).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CUDA_EMU_CUDA_EMU_H
#define BT_RUNTIME_DEVICE_CUDA_EMU_CUDA_EMU_H

namespace bt::cuda_emu {

/// The name CudaBackend uses for the emulated device ("cuda-emu"): as
/// `--device cuda-emu`, the value of $BT_DEVICE and CudaOptions::
/// driver_library.
inline constexpr char kDeviceName[] = "cuda-emu";

/// The emulator's definition of a CUDA driver API or cuBLAS entry point
/// (`cuInit`, `cuLaunchKernel`, `cublasSgemm_v2`, ...; the names the runtime
/// resolves with dlsym), or nullptr for a name it does not provide.
void *LookupSymbol(const char *name);

/// Reports so far (every check that fired, in this process).
long ReportCount();

/// Replaces the schedule seed (BT_CUDA_EMU_SEED) for the launches that
/// follow: 0 runs blocks and threads in order, any other value permutes
/// them. For tests that compare the results of several seeds in one
/// process (bt-cuda-emu-kernel-tests); not thread-safe against a launch.
void SetScheduleSeed(unsigned long long seed);

} // namespace bt::cuda_emu

#endif // BT_RUNTIME_DEVICE_CUDA_EMU_CUDA_EMU_H
