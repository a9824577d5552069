//===- cpu_device.h - the CPU device ----------------------------*- C++ -*-===//
//
// The device of cpu artifacts (docs/abi.md, docs/codegen.md): the kernels
// section is a shared object of CPU kernels that runs in this process on
// host memory. A tensor made resident is a view of the caller's buffer (the
// artifact's mmapped weights are passed to the kernels without a copy), a
// call passes the host arguments as they are, and the outputs are the
// kernels' own malloc'ed buffers, adopted by the returned tensors.
// Kernel libraries leave their BLAS calls undefined and resolve them
// against the process: this library links OpenBLAS.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CPU_CPU_DEVICE_H
#define BT_RUNTIME_DEVICE_CPU_CPU_DEVICE_H

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/device.h"
#include "bt/runtime/device/kernels.h"

namespace bt::rt {

class CpuDevice : public Device {
public:
  CpuDevice() = default;

  std::string name() const override { return "cpu"; }
  /// SetBlasThreads(threads); returns the threads of the kernels' parallel
  /// loops (OmpThreads()), or OpenBLAS's count without an OpenMP runtime.
  int SetThreads(int threads) override;
  /// The CPU the loaded kernels were compiled for (Manifest.cpu, e.g.
  /// "x86-64-v3"), or "cpu".
  std::string Describe() const override;
  /// KernelLibrary::Load of the kernels section; then the thread count of
  /// the last SetBlasThreads goes to the OpenMP runtime the kernels loaded.
  absl::StatusOr<std::unique_ptr<KernelLibrary>>
  LoadCode(const Artifact &artifact) override;
  /// Host memory, 64-byte aligned (Tensor::Allocate), owned by the device
  /// until Release.
  absl::StatusOr<DeviceTensor> Allocate(DType dtype,
                                        const std::vector<int64_t> &shape) override;
  /// A view of `t`'s buffer (no copy).
  absl::StatusOr<DeviceTensor> Upload(const Tensor &t) override;
  absl::Status Download(const DeviceTensor &src, Tensor &dst) override;
  /// Frees a buffer of Allocate; a view of Upload needs nothing.
  void Release(const DeviceTensor &t) override;
  /// A memmove within host memory.
  absl::Status CopyOnDevice(const DeviceTensor &src,
                            const DeviceTensor &dst) override;
  /// CallEntryPoint on the params' host buffers.
  absl::StatusOr<std::vector<Tensor>>
  Call(KernelEntryFn fn, const proto::EntryPoint &ep,
       absl::Span<const DeviceTensor *const> params,
       absl::Span<Tensor *const> args) override;
  /// While a span is open, Call registers its params' buffers as constant
  /// weights (RegisterConstantWeights, small_gemm.h): the small-M GEMMs pack
  /// each weight they read once and reuse the panels until the outermost
  /// span ends (ReleaseConstantWeights). Thread-safe.
  void BeginConstantParams() override;
  void EndConstantParams() override;
  /// Kernels run synchronously on the calling thread: nothing to wait for.
  absl::Status Synchronize() override { return absl::OkStatus(); }

private:
  std::string cpu_;
  std::mutex mu_;
  std::map<uint64_t, Tensor> allocations_; // Allocate's buffers by address
  int constant_spans_ = 0;                  // open BeginConstantParams spans
};

/// Calls `fn` for entry point `ep` with `params` (in ep.params() order) and
/// `inputs` (in ep.inputs() order), per docs/abi.md. Arguments are passed as
/// dense row-major descriptors (allocated = aligned = data, offset 0). An
/// input whose spec is `inout` (TensorSpec.inout) is passed the same way but
/// the kernel writes it in place: it must be a writable buffer the caller
/// owns that aliases no other argument (Model::Run checks this); it has no
/// slot in the result block.
/// Returns the outputs in ep.outputs() order, each an owning Tensor that
/// takes ownership of the kernel's malloc'ed `allocated` buffer (data at
/// aligned + offset); an output that is not dense row-major is copied into a
/// new dense tensor and its buffer freed. Outputs sharing one `allocated`
/// share ownership (freed once).
/// Errors (InvalidArgument, naming the entry and tensor): argument count
/// mismatch, an argument dtype/rank that does not match its spec (params:
/// the rank of the tensor given), an output with a negative size, a size
/// that contradicts a static dim of its spec, or a null buffer with
/// elements; the call itself cannot be checked (a crashing kernel crashes).
absl::StatusOr<std::vector<Tensor>>
CallEntryPoint(KernelEntryFn fn, const proto::EntryPoint &ep,
               absl::Span<const Tensor *const> params,
               absl::Span<const Tensor *const> inputs);

/// Sets the CPU thread count of this process: the OpenMP threads that run
/// the generated kernels' parallel loops and OpenBLAS's threads (the
/// kernels' GEMMs). With OpenBLAS's OpenMP build both are one pool
/// (docs/codegen.md, "Threads"). The OpenMP count goes to the calling
/// thread's libomp: the one the process links, or one a kernel library
/// loads later (the static bt-launcher links none; CpuDevice::LoadCode then
/// sets the count as soon as the kernels bring libomp in). `threads` <= 0
/// changes nothing. Returns the count OpenBLAS reports afterwards.
int SetBlasThreads(int threads);

/// Called by bt_cpu_sgemm before every product, `in_team` telling whether
/// the caller is a thread of an active OpenMP team (a generated kernel's
/// parallel loop that calls GEMMs: attention's loop over heads,
/// bt-parallel-outer-loops). In a team, OpenBLAS's pthreads build (the
/// static standalone executable's libopenblas.a) is set to one thread;
/// outside one, the count it had is restored (unless SetBlasThreads set a
/// count meanwhile). Multithreaded calls of that build made by two threads
/// at once run one at a time behind its level-3 lock while its server
/// threads compete with the team for the cores: a block_main_b4_5 prefill of
/// 8 x 512 tokens took 4-6x as long. Its OpenMP build (bt-run) runs a call
/// made inside a team on the calling thread by itself, and the sequential
/// build has no threads: nothing to do for those. Thread-safe.
void MatchBlasThreadsToTeam(bool in_team);

/// `name` (e.g. "omp_set_num_threads") in the OpenMP runtime of this
/// process: the libomp the binary links (global scope, ahead of libgomp in
/// the load order: docs/codegen.md "Threads"), else one a kernel library has
/// loaded (found with RTLD_NOLOAD; the static bt-launcher links none). Null
/// when there is none yet. Never loads libomp itself.
void *OmpSymbol(const char *name);

/// The threads the calling thread's next OpenMP parallel region gets
/// (omp_get_max_threads) in the OpenMP runtime this process has loaded, or 0
/// when it has none yet (the static bt-launcher before it loads kernels with
/// parallel loops).
int OmpThreads();

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_CPU_CPU_DEVICE_H
