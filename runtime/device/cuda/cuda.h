//===- cuda.h - CUDA backend of the runtime (dlopen'ed driver API) -*- C++ -*-===//
//
// The runtime's CUDA backend (docs/design.md §5, docs/abi.md "Kernel library (CUDA
// target)"): the CUDA driver API (libcuda.so.1) and cuBLAS are loaded with
// dlopen, so every binary links and runs on machines without a GPU and says
// why none can be used. A CudaBackend owns the device's primary context, one
// stream, the artifact's PTX module and a device memory pool; the kernel
// library's host code reaches it through the C functions bt_gpu_* (defined
// in cuda.cc, exported by every executable that links btrt) once it is made
// current.
//
//   absl::StatusOr<std::unique_ptr<CudaBackend>> gpu = CudaBackend::Open();
//   if (!gpu.ok()) ... // NotFound: no driver; Unavailable: no usable GPU
//   (*gpu)->LoadModule(ptx);  (*gpu)->MakeCurrent();  ... bt_entry_<name>(argv)
//
// Nothing here has run on a GPU yet (issue 6): the tests use the CUDA
// toolkit's stub driver and a fake driver/cuBLAS (runtime/test/fake_cuda.c).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CUDA_CUDA_H
#define BT_RUNTIME_DEVICE_CUDA_CUDA_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/device.h"
#include "bt/runtime/device/kernels.h"
#include "bt/runtime/device/sampler_callback.h"

namespace bt::rt {

/// What CudaBackend::Open loads.
struct CudaOptions {
  /// The driver library; empty: $BT_CUDA_DRIVER, else "libcuda.so.1".
  std::string driver_library;
  /// cuBLAS, tried in order (loaded on the first GEMM); empty:
  /// $BT_CUBLAS_LIBRARY, else libcublas.so.13, .12, libcublas.so.
  std::vector<std::string> cublas_libraries;
  /// Device ordinal.
  int device = 0;
  /// When set, the driver's and cuBLAS's entry points come from here by
  /// name instead of from dlopen'ing the libraries above (an emulated
  /// driver in this process); nullptr for a name it lacks. The only place
  /// the backend gets driver symbols from (LoadDriver, LoadCublas).
  std::function<void *(const char *symbol)> symbols;
  /// What `symbols` is, for messages ("the emulated driver").
  std::string symbols_name;
  /// The driver is an emulator (the cuda-emu device, exec/drivers.h,
  /// docs/cuda-emulator.md): device allocations have their exact size (no
  /// caching pool, so that the emulator checks the bounds the caller asked
  /// for), and a failed call of the host code's GPU ABI exits with status 1
  /// (the emulator has printed its report) instead of aborting.
  bool emulated = false;
};

/// The device a backend runs on.
struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0; // compute capability (sm_90: 9, 0)
  int64_t total_memory = 0;       // bytes
  int driver_version = 0;         // e.g. 13000
  /// "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB, CUDA driver 13.0)".
  std::string Describe() const;
};

/// A caching pool of device memory: requests are rounded to a size class
/// (Rounded) and released blocks are kept on free lists by size class, so a
/// steady workload (the same decode step again and again) allocates from
/// the device only on its first call. Blocks are 256-byte aligned
/// (cuMemAlloc's alignment). Thread-safe.
class DevicePool {
public:
  /// Allocates `bytes` (> 0) on the device; returns the address.
  using AllocFn = std::function<absl::StatusOr<uint64_t>(uint64_t bytes)>;
  using FreeFn = std::function<void(uint64_t address)>;

  /// `caching` false (the emulated device): every request is allocated
  /// with its exact size and freed at once, so that the device checks the
  /// bounds the caller asked for.
  DevicePool(AllocFn alloc, FreeFn free, bool caching = true);
  ~DevicePool(); // releases everything (cached and in use) to the device

  /// A block of at least `bytes`; bytes == 0 gives 0 (no block). On a
  /// device allocation failure the cache is released and the allocation
  /// retried once. Errors: the device's (ResourceExhausted with the
  /// request, bytes in use and cached).
  absl::StatusOr<uint64_t> Allocate(int64_t bytes);
  /// Returns a block of Allocate to the cache; 0 is ignored. Errors:
  /// InvalidArgument for an address that is not an allocated block (never
  /// allocated, or freed twice).
  absl::Status Free(uint64_t address);
  /// Releases all cached blocks to the device.
  void Trim();

  /// The size class of a request: multiples of 256 bytes up to 1 MiB, of
  /// 1 MiB above (so that sizes varying with the prompt length still hit).
  static uint64_t Rounded(uint64_t bytes);

  int64_t bytes_in_use() const;
  int64_t bytes_cached() const;
  int64_t device_allocations() const; // cumulative calls of AllocFn
  /// Cumulative calls of FreeFn before the destructor (cache flushes, Trim,
  /// an uncached pool's Free); cuMemFree synchronizes the device.
  int64_t device_frees() const;

private:
  AllocFn alloc_;
  FreeFn free_;
  mutable std::mutex mu_;
  std::map<uint64_t, uint64_t> in_use_;                  // address → size
  std::multimap<uint64_t, uint64_t> cached_;             // size → address
  int64_t bytes_in_use_ = 0, bytes_cached_ = 0, device_allocations_ = 0;
  int64_t device_frees_ = 0;
  bool caching_ = true;
};

struct CudaDriver; // the dlopen'ed entry points (cuda.cc)
struct Cublas;
struct CublasLt;
class CudaBackend;

/// A CUDA graph: the work a CudaBackend::CaptureGraph call issued on the
/// backend's stream (kernel launches, cuBLAS GEMMs, memsets, in stream
/// order), instantiated; CudaBackend::LaunchGraph replays it with the
/// captured arguments (device addresses, sizes, scalars) on the device
/// memory as it is at the replay. The graph owns every device block that
/// the host code allocated during the capture (bt_gpu_alloc; its
/// bt_gpu_free calls during the capture are deferred), since each replay
/// writes them again: the captured call's outputs are among them, readable
/// after each replay and released with the graph, never by the caller
/// (bt_gpu_free of one ends the process). Destroy it before its backend.
class CudaGraph {
public:
  ~CudaGraph(); // synchronizes the stream, releases the blocks to the pool
  CudaGraph(const CudaGraph &) = delete;
  CudaGraph &operator=(const CudaGraph &) = delete;

  /// Nodes of the graph (kernels, GEMMs and memsets captured).
  int64_t nodes() const { return nodes_; }
  /// The blocks the graph owns (device addresses), ascending.
  const std::vector<uint64_t> &blocks() const { return blocks_; }

private:
  friend class CudaBackend;
  CudaGraph() = default;
  CudaBackend *backend_ = nullptr;
  void *exec_ = nullptr; // CUgraphExec
  int64_t nodes_ = 0;
  std::vector<uint64_t> blocks_;
};

class CudaBackend {
public:
  /// Loads the driver, initializes it and sets up `options.device`: its
  /// primary context (made current on this thread), a stream and the
  /// memory pool. Errors, all naming what was tried:
  ///   NotFound     — the driver library cannot be loaded ("no CUDA driver
  ///                  found: dlopen(libcuda.so.1): ...") or lacks an entry
  ///                  point;
  ///   Unavailable  — the driver cannot be used: cuInit fails (e.g.
  ///                  CUDA_ERROR_NO_DEVICE, CUDA_ERROR_STUB_LIBRARY), no
  ///                  device, or the ordinal is out of range.
  static absl::StatusOr<std::unique_ptr<CudaBackend>>
  Open(const CudaOptions &options = {});
  ~CudaBackend();

  const CudaDeviceInfo &device() const { return device_; }
  /// CudaOptions::emulated of Open.
  bool emulated() const { return emulated_; }
  DevicePool &pool() { return *pool_; }

  /// Loads the artifact's PTX module (JIT-compiled by the driver for the
  /// device). Replaces a module loaded before. Errors: Internal with the
  /// driver's error and its JIT log.
  absl::Status LoadModule(absl::string_view ptx);
  /// Launches kernel `name` of the module on the stream (docs/abi.md,
  /// bt_gpu_launch). Errors: FailedPrecondition without a module, NotFound
  /// for a kernel the module lacks, Internal for a failed launch.
  absl::Status Launch(const char *name, int64_t gx, int64_t gy, int64_t gz,
                      int64_t bx, int64_t by, int64_t bz, int32_t smem,
                      void **params);
  /// cblas_sgemm semantics (row-major, order 101, trans 111/112) on device
  /// pointers with cuBLAS (column-major: computes Cᵀ = op(B)ᵀ·op(A)ᵀ),
  /// FP32 math (CUBLAS_DEFAULT_MATH: no TF32). cuBLAS is loaded on the
  /// first call. Errors: InvalidArgument for a bad order/transpose,
  /// NotFound if no cuBLAS library loads, Internal for cuBLAS errors.
  absl::Status Sgemm(int32_t order, int32_t trans_a, int32_t trans_b,
                     int32_t m, int32_t n, int32_t k, float alpha,
                     const float *a, int32_t lda, const float *b, int32_t ldb,
                     float beta, float *c, int32_t ldc);
  /// Sgemm with bf16 A and B (`lda`, `ldb` in elements) and an f32 C:
  /// cublasGemmEx with CUDA_R_16BF inputs, a CUDA_R_32F output and
  /// CUBLAS_COMPUTE_32F (f32 accumulation; tensor cores on sm_80+). The
  /// `--dtype bf16` GEMMs (bt-bf16-gemms). Errors: Sgemm's, and NotFound
  /// for a cuBLAS without cublasGemmEx.
  /// With `bf16_c`, C holds bf16 elements (`ldc` in elements): CUDA_R_16BF
  /// C, read as bf16 when beta != 0 and written as the f32 result rounded
  /// to nearest even (the bf16 GEMM products of bt-bf16-gemm-outputs).
  absl::Status GemmBf16(int32_t order, int32_t trans_a, int32_t trans_b,
                        int32_t m, int32_t n, int32_t k, float alpha,
                        const void *a, int32_t lda, const void *b, int32_t ldb,
                        float beta, void *c, int32_t ldc,
                        bool bf16_c = false);
  /// GemmBf16 with a bf16 C (`ldc` in elements) written as
  /// bf16(op(A)·op(B) + bias), the bias a bf16 vector of `n` elements (one
  /// per column of the row-major C) added in f32 by the epilogue of the
  /// GEMM: cublasLtMatmul with CUBLASLT_EPILOGUE_BIAS, CUDA_R_16BF A, B, C
  /// and bias, CUBLAS_COMPUTE_32F (the QKV projection of `--dtype bf16`,
  /// bt-gemm-to-blas{bf16-bias-out-callee}; the same values as a bf16 C
  /// holding the broadcast bias with beta = 1, without that C's bytes).
  /// cuBLASLt is loaded on the first call ($BT_CUBLASLT_LIBRARY, else
  /// libcublasLt.so.13, .12, libcublasLt.so; the emulator's in-process
  /// one). Errors: GemmBf16's, NotFound if no cuBLASLt loads, Internal for
  /// cuBLASLt errors.
  absl::Status GemmBf16Bias(int32_t order, int32_t trans_a, int32_t trans_b,
                            int32_t m, int32_t n, int32_t k, float alpha,
                            const void *a, int32_t lda, const void *b,
                            int32_t ldb, void *c, int32_t ldc,
                            const void *bias);
  /// Synchronous copies (after all work queued on the stream).
  absl::Status CopyToHost(void *dst, uint64_t src, int64_t bytes);
  absl::Status CopyToDevice(uint64_t dst, const void *src, int64_t bytes);
  /// Copies `bytes` of device memory from `src` to `dst` in stream order
  /// (cuMemcpyDtoDAsync: no synchronization; recorded by a capture).
  /// Errors: Unimplemented for a driver without it; the driver's.
  absl::Status CopyOnDevice(uint64_t dst, uint64_t src, int64_t bytes);
  /// Sets `bytes` bytes of device memory at `dst` to `value`, in stream
  /// order (cuMemsetD8Async: no synchronization, no host<->device traffic).
  /// Errors: the driver's.
  absl::Status Memset(uint64_t dst, uint8_t value, int64_t bytes);
  absl::Status Synchronize();

  /// Captures what `work` issues on the stream into a CUDA graph
  /// (cuStreamBeginCapture in relaxed mode, cuStreamEndCapture,
  /// cuGraphInstantiate): nothing runs during the capture. `work` must not
  /// synchronize or copy between host and device (the capture fails with
  /// the driver's CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). Errors:
  /// Unimplemented for a driver without the graph API; FailedPrecondition
  /// when a capture is in progress; `work`'s own error (the capture is ended
  /// and discarded); Internal for the driver's errors (naming the call).
  /// Not reentrant; one capture per backend at a time.
  absl::StatusOr<std::unique_ptr<CudaGraph>>
  CaptureGraph(const std::function<absl::Status()> &work);
  /// Replays `graph` (a graph of this backend) on the stream
  /// (cuGraphLaunch; does not wait). Errors: InvalidArgument for another
  /// backend's graph; the driver's (Internal).
  absl::Status LaunchGraph(const CudaGraph &graph);
  /// Whether a CaptureGraph is in progress (the host code's allocations then
  /// go to the graph).
  bool capturing() const { return capture_ != nullptr; }
  /// Whether the driver has the graph API CaptureGraph needs (an older
  /// driver, or a test's fake one, may not).
  bool has_graphs() const;
  /// bt_gpu_alloc / bt_gpu_free during a capture: the block becomes the
  /// graph's / the release is deferred to the graph's destruction. False
  /// (for the free) when no capture is in progress.
  void NoteCapturedAllocation(uint64_t block);
  bool DeferCapturedFree(uint64_t block);
  /// Whether `block` belongs to a live CudaGraph of this backend.
  bool OwnedByGraph(uint64_t block) const;

  /// Runs the host code of a CUDA-target entry point, `fn(argv)` (argv as
  /// entry_call::Invoke builds it). A device allocation the host code cannot
  /// get (bt_gpu_alloc: the pool's ResourceExhausted, e.g. a batch whose
  /// activations do not fit) ends the call instead of the process: the
  /// stream is synchronized, every block the host code allocated in this
  /// call and had not freed goes back to the pool, and that error is
  /// returned. Other failures of the GPU ABI in the host code (a launch or
  /// cuBLAS error) still end the process (docs/abi.md). Not reentrant on one
  /// thread.
  absl::Status RunHostCode(KernelEntryFn fn, void **argv);

  /// The host<->device copies, launches and GEMMs issued through this
  /// backend since Open (DeviceTraffic; a copy of 0 bytes is not counted).
  DeviceTraffic traffic() const;
  /// Adds `bytes` to DeviceTraffic::sampler_bytes (the host sampler
  /// callback's share of the copies it made through this backend).
  void CountSamplerBytes(int64_t bytes);

  /// Makes this backend the one the bt_gpu_* functions use (null: none).
  void MakeCurrent();
  static CudaBackend *Current();

private:
  friend class CudaGraph; // its destructor releases its blocks
  CudaBackend() = default;
  absl::Status Check(int result, absl::string_view what) const;

  absl::Status LoadCublas();
  absl::Status LoadCublasLt();

  std::unique_ptr<CudaDriver> driver_;
  std::unique_ptr<Cublas> cublas_;
  std::unique_ptr<CublasLt> cublas_lt_;
  std::vector<std::string> cublas_libraries_;
  std::function<void *(const char *)> symbols_; // CudaOptions::symbols
  std::string symbols_name_;
  bool emulated_ = false;
  CudaDeviceInfo device_;
  int cu_device_ = 0;
  void *context_ = nullptr;
  void *stream_ = nullptr;
  void *module_ = nullptr;
  std::mutex functions_mu_;
  std::map<std::string, void *> functions_; // kernel name → CUfunction
  std::unique_ptr<DevicePool> pool_;
  struct Capture {
    std::vector<uint64_t> blocks; // allocated or freed during the capture
  };
  std::unique_ptr<Capture> capture_;
  mutable std::mutex graph_blocks_mu_;
  std::map<uint64_t, int> graph_blocks_; // block → owning graphs (1)
  std::atomic<int64_t> graph_launches_{0}, graph_nodes_launched_{0},
      device_copies_{0};
  std::atomic<int64_t> to_device_copies_{0}, to_device_bytes_{0},
      to_host_copies_{0}, to_host_bytes_{0}, sampler_bytes_{0}, launches_{0},
      gemms_{0};
};

/// Uploads `t` to a block of `gpu`'s pool (nbytes 0: address 0). Errors:
/// the pool's and the copy's.
absl::StatusOr<DeviceTensor> UploadTensor(CudaBackend &gpu, const Tensor &t);

/// Calls entry point `ep` of a CUDA-target kernel library (docs/abi.md,
/// "Kernel library (CUDA target)") on `gpu`, which it makes current: the
/// host tensors `inputs` (ep.inputs() order) are copied to device buffers
/// of the pool, `params` (ep.params() order) are already on the device;
/// every descriptor is dense row-major (allocated = aligned = the device
/// address, offset 0). After the call (and a stream synchronization) the
/// in-out inputs (TensorSpec.inout) are copied back into their host
/// tensors, which must be writable, the outputs (device buffers of
/// bt_gpu_alloc) are copied into new dense host tensors, returned in
/// ep.outputs() order, and every device buffer of the call is released to
/// the pool. Errors (InvalidArgument, naming the entry and tensor), as
/// CallEntryPoint: an argument count, dtype or rank mismatch; an output with
/// a negative size, a size contradicting a static dim of its spec, or a null
/// buffer with elements; plus the device's errors (copies, synchronization).
absl::StatusOr<std::vector<Tensor>>
CallDeviceEntryPoint(CudaBackend &gpu, KernelEntryFn fn,
                     const proto::EntryPoint &ep,
                     absl::Span<const DeviceTensor *const> params,
                     absl::Span<Tensor *const> inputs);

/// An output of CallDeviceEntryPointResident: a dense tensor in device
/// memory and the pool block it lies in (the caller releases the block once
/// per output that names it).
struct ResidentOutput {
  DeviceTensor tensor;
  uint64_t block = 0;
};

/// As CallDeviceEntryPoint, but each argument is a host tensor (copied in,
/// and back when in-out) or a resident DeviceTensor (in place), and the
/// outputs stay on the device: a dense output is the kernels' own buffer, a
/// strided one is made dense in a new block (through the host: the one
/// output this path copies, e.g. prefill's context). Errors: those of
/// CallDeviceEntryPoint, and InvalidArgument for a resident argument whose
/// dtype or rank differs from its spec.
absl::StatusOr<std::vector<ResidentOutput>>
CallDeviceEntryPointResident(CudaBackend &gpu, KernelEntryFn fn,
                             const proto::EntryPoint &ep,
                             absl::Span<const DeviceTensor *const> params,
                             absl::Span<const DeviceArg> args);

/// A resident call of a CUDA-target entry point recorded as a CUDA graph
/// (RecordDeviceEntryPointResident), replayed once per call. Each input has
/// its own binding, fixed at the recording: a host scalar (host_scalar) is
/// baked into the graph and must have the same value at each replay; an
/// in-out resident tensor (a KV cache) is used in place and must be the same
/// tensor (address) at each replay; any other input gets a block of the
/// recording (a slot) that Replay fills from the call's argument (a device
/// copy for a resident tensor, an upload for a host one; same dtype and
/// shape as at the recording). The outputs are the graph's blocks: each
/// replay rewrites them, and they stay valid until the recording is
/// destroyed (never released by the caller). Destroy it before the backend.
class DeviceRecording {
public:
  ~DeviceRecording(); // the graph first (it synchronizes), then the slots
  /// Fills the slots from `args` (ep.inputs() order, as at the recording)
  /// and launches the graph (no synchronization). Errors (InvalidArgument,
  /// naming the entry and input): a host scalar with another value, an
  /// in-out tensor at another address, another dtype or shape; the device's.
  absl::Status Replay(absl::Span<const DeviceArg> args);
  /// Dense outputs in ep.outputs() order (the graph's blocks).
  const std::vector<DeviceTensor> &outputs() const { return outputs_; }
  /// Nodes of the graph (kernels, GEMMs, memsets, copies).
  int64_t nodes() const { return graph_->nodes(); }

private:
  friend absl::StatusOr<std::unique_ptr<DeviceRecording>>
  RecordDeviceEntryPointResident(CudaBackend &, KernelEntryFn,
                                 const proto::EntryPoint &,
                                 absl::Span<const DeviceTensor *const>,
                                 absl::Span<const DeviceArg>);
  DeviceRecording() = default;
  CudaBackend *gpu_ = nullptr;
  const proto::EntryPoint *ep_ = nullptr;
  std::unique_ptr<CudaGraph> graph_;
  struct Binding {
    enum Kind { kScalar, kInPlace, kSlot } kind = kSlot;
    std::string scalar; // kScalar: the value's bytes
    uint64_t address = 0; // kInPlace: the tensor; kSlot: the slot
    DType dtype = proto::F32;
    std::vector<int64_t> shape;
    int64_t bytes = 0;
  };
  std::vector<Binding> bindings_; // ep.inputs() order
  std::vector<DeviceTensor> outputs_;
};

/// Records entry point `ep` (params and args as CallDeviceEntryPointResident)
/// as a CUDA graph: the slots are allocated and filled from `args`, the host
/// code runs once under a stream capture (CudaBackend::CaptureGraph), so
/// nothing is computed until the first Replay. Errors: those of
/// CallDeviceEntryPointResident's checks; Unimplemented for a host in-out
/// input, an output that is not dense, or a driver without graphs; the
/// capture's (e.g. a synchronous copy in the host code, such as a host
/// sampler step).
absl::StatusOr<std::unique_ptr<DeviceRecording>>
RecordDeviceEntryPointResident(CudaBackend &gpu, KernelEntryFn fn,
                               const proto::EntryPoint &ep,
                               absl::Span<const DeviceTensor *const> params,
                               absl::Span<const DeviceArg> args);

/// A greedy sampler step on the device (docs/generation.md, "Sampling on
/// the device"): launches the artifact's kernel `bt_sample_greedy`
/// (bt-gpu-sampler-kernels) on `logits` F32 [B', V] and `tokens` I64 [B']
/// (device descriptors, any strides) with a per-row state I64 [B', 2] that
/// the backend keeps for `handle` until EndDeviceSampling (allocated on the
/// first step; the kernel initializes it). No host<->device copy. Errors:
/// those of the pool and of Launch (NotFound for an artifact built before
/// the kernel existed).
absl::Status SampleOnDevice(CudaBackend &gpu, int64_t handle,
                            const StridedMemRef<float, 2> &logits,
                            const StridedMemRef<int64_t, 1> &tokens,
                            const SamplerCallbackTarget::DeviceStep &step);
/// The same for bf16 logits BF16 [B', V] (the bits; a `--dtype bf16`
/// artifact's decode entries): launches `bt_sample_greedy_bf16` /
/// `bt_sample_bf16`, which extend each logit exactly to f32 and choose as
/// the f32 kernels do.
absl::Status SampleOnDevice(CudaBackend &gpu, int64_t handle,
                            const StridedMemRef<uint16_t, 2> &logits,
                            const StridedMemRef<int64_t, 1> &tokens,
                            const SamplerCallbackTarget::DeviceStep &step);
/// A greedy step from the per-tile maxima of `bt_lm_head_argmax_bf16`
/// (lib/Codegen/CUDA/GPUKernelText.h): `maxima` F32 [B', T] and `ids` I32
/// [B', T] (device memory, any strides) for the tokens I64 [B'] that
/// SampleOnDevice would choose from the bf16 logits those tiles cover
/// (launches `bt_sample_greedy_partials`; the same state and EOS rule).
/// Errors: those of SampleOnDevice; Internal for a step that is not greedy.
absl::Status SampleOnDevicePartials(
    CudaBackend &gpu, int64_t handle, const StridedMemRef<float, 2> &maxima,
    const StridedMemRef<int32_t, 2> &ids,
    const StridedMemRef<int64_t, 1> &tokens,
    const SamplerCallbackTarget::DeviceStep &step);
/// The LM head of a bf16 decode step (cuda_lm_head.cc), x BF16 [M, K], w
/// BF16 [N, K] and logits BF16 [M, N] device views. LMHeadArgmaxFits: whether
/// bt_lm_head_argmax_bf16 can compute logits = x · wᵀ of these views (K a
/// multiple of 16, x and w with unit inner strides and 4-byte aligned bf16
/// pairs: even offsets and row strides; pv F32 and pi I32 [M, ceil(N / 64)]
/// with unit inner strides).
bool LMHeadArgmaxFits(const StridedMemRef<uint16_t, 2> &x,
                      const StridedMemRef<uint16_t, 2> &w,
                      const StridedMemRef<uint16_t, 2> &logits,
                      const StridedMemRef<float, 2> &pv,
                      const StridedMemRef<int32_t, 2> &pi);
/// logits = x · wᵀ through cuBLAS, bf16 C (beta 0), as bt-gemm-to-blas calls
/// bt_gpu_gemm_bf16_out. Errors: InvalidArgument for shapes that do not
/// form the product or exceed int32; those of CudaBackend::GemmBf16.
absl::Status LMHeadGemmBf16(CudaBackend &gpu, const StridedMemRef<uint16_t, 2> &x,
                            const StridedMemRef<uint16_t, 2> &w,
                            StridedMemRef<uint16_t, 2> &logits);
/// Launches bt_lm_head_argmax_bf16 over x and w into pv and pi (grid ceil(N
/// / 64), 128 threads, 768 bytes of shared memory); LMHeadArgmaxFits must
/// hold. Errors: Launch's.
absl::Status LMHeadArgmaxBf16(CudaBackend &gpu,
                              const StridedMemRef<uint16_t, 2> &x,
                              const StridedMemRef<uint16_t, 2> &w,
                              const StridedMemRef<float, 2> &pv,
                              const StridedMemRef<int32_t, 2> &pi);
/// False when $BT_LM_HEAD_ARGMAX is "0" (read once): the fused greedy LM
/// head is off (a benchmark's side-by-side comparison).
bool LMHeadArgmaxEnabled();
/// Allocates and zeroes `handle`'s state for `rows` rows before the first
/// step (Device::BeginSampling), so that SampleOnDevice neither allocates
/// nor writes memory from the host (a first block captured into a CUDA
/// graph). A no-op when the state exists. Errors: the pool's.
absl::Status BeginDeviceSampling(CudaBackend &gpu, int64_t handle,
                                 int64_t rows);
/// Reads the NaN flags of `handle`'s state (one copy of B' x 16 bytes) and
/// frees it; OK when SampleOnDevice never ran for it. Errors:
/// InvalidArgument naming the first row whose logits held a NaN.
absl::Status EndDeviceSampling(CudaBackend &gpu, int64_t handle);

/// One line for `bt-launcher devices`: the device of CudaBackend::Open(), or
/// why there is none ("no CUDA GPU found: ...").
std::string DescribeCudaAvailability(const CudaOptions &options = {});

} // namespace bt::rt

extern "C" {
// The runtime's GPU ABI called by the CUDA target's kernel library
// (docs/abi.md). Each reports a failure (no current backend, a driver
// error) on stderr and aborts: the host code has no error path.
void *bt_gpu_alloc(int64_t bytes);
void bt_gpu_free(void *ptr);
void bt_gpu_launch(const char *name, int64_t gx, int64_t gy, int64_t gz,
                   int64_t bx, int64_t by, int64_t bz, int32_t smem,
                   void **params, int32_t num_params);
void bt_gpu_sgemm(int32_t order, int32_t trans_a, int32_t trans_b, int32_t m,
                  int32_t n, int32_t k, float alpha, const float *a,
                  int32_t lda, const float *b, int32_t ldb, float beta,
                  float *c, int32_t ldc);
// bt_gpu_sgemm with bf16 `a` and `b` (CudaBackend::GemmBf16).
void bt_gpu_gemm_bf16(int32_t order, int32_t trans_a, int32_t trans_b,
                      int32_t m, int32_t n, int32_t k, float alpha,
                      const void *a, int32_t lda, const void *b, int32_t ldb,
                      float beta, float *c, int32_t ldc);
// bt_gpu_gemm_bf16 with a bf16 C (CudaBackend::GemmBf16 with bf16_c).
void bt_gpu_gemm_bf16_out(int32_t order, int32_t trans_a, int32_t trans_b,
                          int32_t m, int32_t n, int32_t k, float alpha,
                          const void *a, int32_t lda, const void *b,
                          int32_t ldb, float beta, void *c, int32_t ldc);
// bt_gpu_gemm_bf16_out with beta = 0 and a bf16 bias [n] that the GEMM's
// epilogue adds (CudaBackend::GemmBf16Bias); `beta` must be 0.
void bt_gpu_gemm_bf16_bias_out(int32_t order, int32_t trans_a,
                               int32_t trans_b, int32_t m, int32_t n,
                               int32_t k, float alpha, const void *a,
                               int32_t lda, const void *b, int32_t ldb,
                               float beta, void *c, int32_t ldc,
                               const void *bias);
void bt_gpu_memcpy_dtoh(void *dst_host, const void *src_device,
                        int64_t bytes);
// The sampler callback of `decode_tokens` on this target (same signature as
// _mlir_ciface_bt_rt_sample, docs/generation.md): `logits` [B, V] and
// `tokens` [B] are device buffers. A step the sampler lets run on the
// device (SamplerCallbackTarget::StepOnDevice: greedy) is SampleOnDevice;
// otherwise the logits are copied to the host, the runtime's sampler picks
// the tokens there and they are copied back.
void _mlir_ciface_bt_gpu_sample(int64_t sampler,
                                bt::rt::StridedMemRef<float, 2> *logits,
                                bt::rt::StridedMemRef<int64_t, 1> *tokens);
// The LM head and sampler of a `--dtype bf16` decode step in one call
// (bt-gpu-lm-head-sampling): logits BF16 [B', V] = x BF16 [B', K] · w BF16
// [V, K]ᵀ (the final LayerNorm's output and `embed_out`), then the tokens
// I64 [B'] as _mlir_ciface_bt_gpu_sample_bf16 chooses them. A greedy device
// step whose logits the caller does not keep (DeviceStep::logits_kept) runs
// `bt_lm_head_argmax_bf16` into pv F32 [B', ceil(V / 64)] and pi I32 [B',
// ceil(V / 64)] (scratch of the host code) and `bt_sample_greedy_partials`,
// and leaves `logits` unwritten (BT_LM_HEAD_ARGMAX=0: never); any other step
// is the cuBLAS GEMM into `logits` and the sampler. All device memory.
void _mlir_ciface_bt_gpu_lm_head_sample_bf16(
    int64_t sampler, bt::rt::StridedMemRef<uint16_t, 2> *x,
    bt::rt::StridedMemRef<uint16_t, 2> *w,
    bt::rt::StridedMemRef<uint16_t, 2> *logits,
    bt::rt::StridedMemRef<int64_t, 1> *tokens,
    bt::rt::StridedMemRef<float, 2> *pv, bt::rt::StridedMemRef<int32_t, 2> *pi);
}

#endif // BT_RUNTIME_DEVICE_CUDA_CUDA_H
