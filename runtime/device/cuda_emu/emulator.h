//===- emulator.h - internals of the emulated CUDA device --------*- C++ -*-===//
//
// Shared by the parts of the emulator (cuda_emu.h is its interface):
// device memory (memory.cc), kernel execution (launch.cc), the driver API
// (driver.cc), cuBLAS and cuBLASLt (cublas.cc), reports (report.cc).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CUDA_EMU_EMULATOR_H
#define BT_RUNTIME_DEVICE_CUDA_EMU_EMULATOR_H

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bt_emu_abi.h"

namespace bt::cuda_emu {

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

/// Prints one report (a check that fired) to stderr: "bt cuda-emu: ERROR:
/// <what>" and the indented `details` lines, and counts it. Only the first
/// BT_CUDA_EMU_MAX_REPORTS are printed.
void Report(const std::string &what, const std::vector<std::string> &details);

//===----------------------------------------------------------------------===//
// Device memory
//===----------------------------------------------------------------------===//

/// One cuMemAlloc.
struct Allocation {
  uint64_t base = 0;  // device address
  uint64_t bytes = 0; // as requested
  uint64_t id = 0;    // 1, 2, ... in allocation order
  bool live = true;
};

/// The emulated device memory: one memfd mapped twice. The host sees device
/// addresses in a PROT_NONE view, so host code that dereferences a device
/// pointer faults (and the fault handler reports it); kernels, copies and
/// cuBLAS go through an accessible alias of the same pages. Each allocation
/// starts on a page (so 256-byte aligned, as cuMemAlloc), is filled with
/// NaN (0x7fc00000 words) and is followed by a guard page; addresses are
/// never reused. Shadows: one byte per byte (initialized: written by a
/// kernel, a copy or cuBLAS; initcheck) and one word per 4-byte word (the
/// launch and thread that last stored it; conflicting global writes).
class DeviceMemory {
public:
  static DeviceMemory &Get();

  /// A new allocation of `bytes` (> 0); 0 when the address space is used up.
  uint64_t Allocate(uint64_t bytes);
  /// Frees a live allocation's base address; false when it is not one.
  bool Free(uint64_t address);
  /// The allocation (live or freed) whose [base, base + bytes) holds
  /// `address`, else the nearest one below it (for reports), or nullptr.
  const Allocation *Find(uint64_t address, bool *inside) const;
  /// Whether [address, address + bytes) lies inside one live allocation.
  bool InLive(uint64_t address, uint64_t bytes) const;
  /// "allocation #3 [0x..., +4096 bytes)" or why there is none.
  std::string Describe(uint64_t address, uint64_t bytes) const;

  bool IsDevice(uint64_t address) const {
    return address - base_ < capacity_;
  }
  /// The accessible alias of a device address.
  char *Host(uint64_t address) const {
    return alias_ + (address - base_);
  }
  uint8_t *InitShadow(uint64_t address) const {
    return init_ + (address - base_);
  }
  uint64_t *WriteShadow(uint64_t address) const {
    return writes_ + ((address - base_) >> 2);
  }
  /// Marks [address, address + bytes) initialized.
  void SetInitialized(uint64_t address, uint64_t bytes);
  /// The first byte of [address, address + bytes) never written, or
  /// UINT64_MAX.
  uint64_t FirstUninitialized(uint64_t address, uint64_t bytes) const;

private:
  DeviceMemory();
  char *view_ = nullptr;   // PROT_NONE: the addresses the host sees
  char *alias_ = nullptr;  // the same pages, accessible to the emulator
  uint8_t *init_ = nullptr;
  uint64_t *writes_ = nullptr;
  uint64_t base_ = 0, capacity_ = 0, next_ = 0;
  uint64_t live_bytes_ = 0; // of live allocations (Settings::memory_limit)
  int fd_ = -1;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Allocation> allocations_; // by base
};

/// Installs the SIGSEGV handler that reports host dereferences of device
/// pointers and stack overflows of emulated threads (once).
void InstallFaultHandler();
/// Registers [lo, hi) as the guard page of an emulated thread's stack.
void RegisterStackGuards(uintptr_t lo, uintptr_t hi);

//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

using KernelEntry = void (*)(void **params);

struct Module {
  void *handle = nullptr;
  int fd = -1;
  std::vector<std::string> sites; // bt_emu_site_table
};

struct Function {
  Module *module = nullptr;
  std::string name;
  KernelEntry entry = nullptr;
  bool sync = false; // K__bt_emu_flags & BT_EMU_KERNEL_SYNC
  /// K__bt_emu_param_bytes: {n, bytes of parameter 0, ...}; null for a
  /// kernel written against the ABI by hand (tests), which a stream capture
  /// cannot record.
  const int32_t *param_bytes = nullptr;
};

struct LaunchConfig {
  unsigned grid[3], block[3];
  unsigned smem;
};

/// Runs `f` over the grid (launch.cc). Returns false when a check fired
/// during the launch (reported) or a thread trapped.
bool RunKernel(const Function &f, const LaunchConfig &config, void **params);

/// Global-memory traffic of one kernel name (profile.cc): launches; bytes
/// loaded / stored by its threads (every access); bytes of the distinct
/// 32-byte sectors each launch read / wrote (summed over launches); FLOPs
/// (cuBLAS GEMMs only: 2·m·n·k; kernels' arithmetic is not counted).
struct KernelProfile {
  uint64_t launches = 0, access_read = 0, access_written = 0;
  uint64_t sector_read = 0, sector_written = 0, flops = 0;
  KernelProfile &operator+=(const KernelProfile &o) {
    launches += o.launches;
    access_read += o.access_read;
    access_written += o.access_written;
    sector_read += o.sector_read;
    sector_written += o.sector_written;
    flops += o.flops;
    return *this;
  }
};
/// Adds `p` to the row of `name` ("cublasSgemm" for GEMMs).
void ProfileAdd(const std::string &name, const KernelProfile &p);
/// The sum of every row.
KernelProfile ProfileTotal();

//===----------------------------------------------------------------------===//
// cuBLAS and cuBLASLt (cublas.cc) and what they use of the driver
//===----------------------------------------------------------------------===//

/// cuBLAS status values (cublas_api.h).
constexpr int kCublasSuccess = 0, kCublasInvalidValue = 7,
              kCublasExecutionFailed = 13;

/// A cuBLAS / cuBLASLt GEMM by value (alpha and beta read at the call, as
/// cuBLAS's host pointer mode does when a capture records it): column-major
/// C = alpha·op(A)·op(B) + beta·C, C m×n (cublasSgemm_v2's arguments).
struct GemmCall {
  int ta, tb, m, n, k;
  float alpha, beta;
  const void *a, *b; // f32, or bf16 with `bf16_ab`
  void *c;           // f32, or bf16 with `bf16_c`
  int lda, ldb, ldc;
  /// cublasGemmEx with CUDA_R_16BF A and B (CUBLAS_COMPUTE_32F).
  bool bf16_ab = false;
  /// cublasGemmEx with a CUDA_R_16BF C (with bf16 A and B).
  bool bf16_c = false;
  /// cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS: a CUDA_R_16BF vector of m
  /// elements added to every column of the product before the rounding.
  const void *bias = nullptr;
};

/// Runs `g` (its arguments checked at the call): the operands' bounds and
/// initialization, then the product, in double, rounded once to f32 (a
/// bf16 C then to nearest even); at the call, or when a graph that captured
/// it runs. Returns a cuBLAS status (failures are reported).
int RunGemm(const GemmCall &g);

/// The cuBLAS / cuBLASLt entry point `name` of the emulator, or null.
void *LookupCublasSymbol(const char *name);

/// The driver's lock (driver.cc): every entry point holds it.
std::recursive_mutex &DriverMutex();

/// Whether `stream` is the context's stream (cuStreamCreate's).
bool IsDriverStream(const void *stream);

/// Records `call` as a node of the stream's capture and returns true, or
/// returns false when no capture is active.
bool CaptureGemm(const GemmCall &call);

/// BT_EMU_MMA_M16N8K16_BF16_F32 for one warp (mma.cc): `frags[lane]` the 14
/// words a[4], b[2], c[4], d[4] of each of the 32 lanes (bt_emu_abi.h lays
/// them out); writes every lane's d. Products and sums in double, D rounded
/// to f32 once.
void MmaM16N8K16Bf16F32(uint32_t *const frags[32]);

/// `v` as 0x-prefixed hex (report details).
std::string Hex(uint64_t v);

/// Emulator-wide settings and counters.
struct Settings {
  uint64_t seed = 0;
  long max_reports = 20;
  bool trace = false; // BT_CUDA_EMU_TRACE=1: each launch to stderr
  // BT_CUDA_EMU_MEMORY: the device's memory in bytes (0: the host's), as
  // cuDeviceTotalMem reports it; cuMemAlloc answers out of memory when the
  // live allocations would exceed it (tests of out-of-memory paths).
  uint64_t memory_limit = 0;
};
const Settings &GetSettings();

} // namespace bt::cuda_emu

#endif // BT_RUNTIME_DEVICE_CUDA_EMU_EMULATOR_H
