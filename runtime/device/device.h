//===- device.h - the device interface of the runtime -----------*- C++ -*-===//
//
// A Device runs the entry points of a compiled artifact (docs/abi.md): it
// loads the artifact's code, keeps tensors resident in its memory (the
// weights, uploaded once) and calls an entry point on resident params and
// host arguments. bt::rt::Model (exec/model.h) drives a Device and knows no
// target; the implementations live in their own folders, one per target,
// and are opened by name through exec/drivers.h:
//
//   device/cpu   CpuDevice: this process; host memory, the kernels section
//                is the kernels (a resident tensor is a view, no copy)
//   device/cuda  CudaDevice: a CUDA GPU through the driver API; the ptx
//                section is the kernels, the kernels section their host code
//
// Every entry point has the same argv on every device (device/entry_call.h):
// memref descriptors of dense row-major buffers, pointing to the device's
// memory.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_DEVICE_H
#define BT_RUNTIME_DEVICE_DEVICE_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/kernels.h"
#include "bt/runtime/model/artifact.h"

namespace bt::rt {

/// A dense row-major tensor in a device's memory: the address a memref
/// descriptor of the kernel ABI points to (a host pointer on the CPU, a
/// device pointer on a GPU), its dtype and shape. It belongs to the device
/// that made it (Device::Release).
struct DeviceTensor {
  uint64_t address = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

/// Host<->device traffic and launches of a device since it was opened,
/// counted by the runtime where it issues them (device/cuda: CudaBackend's
/// copies, launches and GEMMs; the same counts on the emulated device). The
/// CPU device moves nothing: all zero.
struct DeviceTraffic {
  int64_t to_device_copies = 0, to_device_bytes = 0; // host -> device
  int64_t to_host_copies = 0, to_host_bytes = 0;     // device -> host
  /// Of the bytes above (both directions), those copied by the host sampler
  /// callback of decode_tokens (_mlir_ciface_bt_gpu_sample: the step's logits
  /// down, its tokens down and up).
  int64_t sampler_bytes = 0;
  int64_t kernel_launches = 0, gemm_calls = 0;
  /// CUDA graph replays (cuGraphLaunch) and the nodes they ran (kernels,
  /// GEMMs, memsets). kernel_launches and gemm_calls count the host's own
  /// launches only: a capture records its launches without running them.
  int64_t graph_launches = 0, graph_nodes = 0;
  /// Device-to-device copies the host issued (CudaBackend::CopyOnDevice:
  /// the inputs of a recorded call's replay).
  int64_t device_copies = 0;
  /// Device-memory allocations and frees that reached the driver
  /// (cuMemAlloc / cuMemFree: misses of the CUDA pool's cache, and the cache
  /// released when an allocation failed); cuMemFree synchronizes the device,
  /// so frees inside a decode loop or a training step stall it. 0 on the CPU.
  int64_t driver_allocations = 0, driver_frees = 0;
  /// Everything the host launched on the stream: kernels, GEMMs, graphs and
  /// device copies (what the H100 model charges a launch cost for).
  int64_t host_launches() const {
    return kernel_launches + gemm_calls + graph_launches + device_copies;
  }
  /// Device-memory traffic, counted only by the emulated device (0
  /// elsewhere; docs/cuda-emulator.md "Traffic counters"): bytes of the
  /// distinct 32-byte sectors each launch read / wrote (kernels; cuBLAS
  /// GEMMs count their operands once), the bytes the kernels' threads
  /// accessed (every load and store), and the GEMMs' FLOPs (2·m·n·k; the
  /// kernels' arithmetic is not counted).
  int64_t global_bytes_read = 0, global_bytes_written = 0;
  int64_t global_access_bytes = 0, gemm_flops = 0;
  /// Both directions.
  int64_t bytes() const { return to_device_bytes + to_host_bytes; }
  /// The element-wise difference `*this - since`.
  DeviceTraffic Since(const DeviceTraffic &since) const;
  /// Adds `d` counter by counter (totals over several spans).
  DeviceTraffic &operator+=(const DeviceTraffic &d);
};

/// The H100 that bench's efficiency report (tooling/efficiency.h) and
/// generation's counters (generate/counters.cc) model (SXM, dense bf16 peak; NVIDIA's data sheet):
/// HBM3 bandwidth in bytes/s, tensor-core peak in FLOP/s, and the host cost
/// of one kernel or GEMM launch in seconds (a round figure for a
/// cudaLaunchKernel without CUDA graphs).
struct H100Model {
  static constexpr double kBandwidth = 3.35e12;
  static constexpr double kPeakFlops = 989e12;
  static constexpr double kLaunchSeconds = 2e-6;
};

/// An argument of Device::CallResident: a host tensor (copied to the device
/// for the call; in-out ones are copied back) or a tensor resident on the
/// device (used in place: an in-out one is updated in place). Exactly one is
/// set.
struct DeviceArg {
  Tensor *host = nullptr;
  const DeviceTensor *device = nullptr;
};

/// A resident call recorded once and replayed for each later call with the
/// same shapes (Device::RecordResident; cuda: a CUDA graph, one launch per
/// replay). The recording fixes how each input is bound: a host scalar
/// (host_scalar) is part of the recording and must keep its value; an in-out
/// resident tensor is updated in place and must be the same tensor; any other
/// input is copied into the recording's own memory by each Replay. The
/// outputs are the recording's tensors: every replay rewrites them, they stay
/// valid until the recording is destroyed, and the caller never releases
/// them. Not thread-safe; destroy it before its device.
class RecordedCall {
public:
  virtual ~RecordedCall() = default;
  /// Runs the recorded work on `args` (ep.inputs() order, DeviceArg as for
  /// CallResident; same dtypes and shapes as at the recording), without
  /// waiting. Errors (InvalidArgument naming the input): a host scalar with
  /// another value, an in-out input that is another tensor, another dtype or
  /// shape; the device's.
  virtual absl::Status Replay(absl::Span<const DeviceArg> args) = 0;
  /// The outputs, dense, in ep.outputs() order.
  virtual const std::vector<DeviceTensor> &outputs() const = 0;
  /// The work items of a replay (cuda: graph nodes: kernels, GEMMs, copies).
  virtual int64_t nodes() const = 0;
};

class Device {
public:
  virtual ~Device() = default;

  /// The device's name, the artifact target it runs: "cpu", "cuda".
  virtual std::string name() const = 0;
  /// One line for people: the CPU the loaded kernels were compiled for
  /// ("x86-64-v3"; "cpu" before LoadCode), the GPU ("NVIDIA H100 80GB HBM3
  /// (sm_90, 79.1 GiB, CUDA driver 13.0)").
  virtual std::string Describe() const = 0;

  /// Loads the code of `artifact` onto the device (docs/abi.md) and returns
  /// the kernel library whose symbols are the entry points (cpu: the kernels
  /// section; cuda: the ptx module is loaded, and the kernels section is its
  /// host code). Errors: those of KernelLibrary::Load, and the device's
  /// (cuda: the PTX does not load, with the driver's JIT log), prefixed with
  /// the artifact path.
  virtual absl::StatusOr<std::unique_ptr<KernelLibrary>>
  LoadCode(const Artifact &artifact) = 0;

  /// Uninitialized device memory for a dense tensor of `dtype` and `shape`
  /// (no memory for 0 elements: address 0). Errors: InvalidArgument for a
  /// negative dim or a byte size that overflows, ResourceExhausted when the
  /// device is out of memory.
  virtual absl::StatusOr<DeviceTensor> Allocate(DType dtype,
                                                const std::vector<int64_t> &shape) = 0;
  /// Makes `t` resident on the device: cpu, a view of `t`'s own memory (no
  /// copy; `t`'s buffer must outlive the DeviceTensor); cuda, a copy in
  /// device memory. Errors: those of Allocate and of the copy.
  virtual absl::StatusOr<DeviceTensor> Upload(const Tensor &t) = 0;
  /// Copies `src` into the host tensor `dst`, which must have its dtype and
  /// shape. Errors: InvalidArgument for a mismatch, the device's for the
  /// copy.
  virtual absl::Status Download(const DeviceTensor &src, Tensor &dst) = 0;
  /// Releases a tensor of Allocate or Upload (address 0: nothing).
  virtual void Release(const DeviceTensor &t) = 0;
  /// Copies the dense tensor `src` into `dst` (same dtype and element
  /// count; the shapes may differ), both in this device's memory, without
  /// going through the host: cuda, one cuMemcpyDtoDAsync on the device's
  /// stream (ordered with its launches; DeviceTraffic::device_copies);
  /// cpu, a memmove. The byte ranges must not overlap partially (equal or
  /// disjoint). Errors: InvalidArgument for a mismatch, Unimplemented where
  /// the device cannot (the default; a CUDA driver without
  /// cuMemcpyDtoDAsync_v2), the device's for the copy. Used by generation to
  /// compact the KV cache's rows when sequences finish
  /// (docs/generation.md).
  virtual absl::Status CopyOnDevice(const DeviceTensor &src,
                                    const DeviceTensor &dst);

  /// Calls `fn`, entry point `ep` of the library of LoadCode, with `params`
  /// resident on this device (ep.params() order) and the host tensors
  /// `args` (ep.inputs() order; the in-out ones, TensorSpec.inout, are
  /// writable buffers updated in place) and returns the outputs as host
  /// tensors in ep.outputs() order. Thread-safe (a device may serialize
  /// calls). Errors (InvalidArgument naming the entry and tensor): argument
  /// count, dtype or rank mismatches; an output with a negative size, a size
  /// contradicting a static dim of its spec, or a null buffer with elements;
  /// and the device's (copies, synchronization).
  virtual absl::StatusOr<std::vector<Tensor>>
  Call(KernelEntryFn fn, const proto::EntryPoint &ep,
       absl::Span<const DeviceTensor *const> params,
       absl::Span<Tensor *const> args) = 0;

  /// Waits for the work queued on the device. Errors: the device's.
  virtual absl::Status Synchronize() = 0;

  /// Whether CallResident is implemented (cuda, cuda-emu): generation then
  /// keeps its state (KV caches, context, token ids) in device memory across
  /// calls (runtime/generate, docs/codegen-cuda.md).
  virtual bool resident_calls() const { return false; }
  /// As Call, but each argument is a host tensor or a resident DeviceTensor
  /// (DeviceArg; resident ones must have the spec's dtype and rank and are
  /// not copied) and the outputs stay on the device: dense DeviceTensors in
  /// ep.outputs() order, owned by the caller (Release each once; outputs the
  /// kernels returned as views of one buffer, or as non-dense views, are
  /// errors). Errors: those of Call; Unimplemented on a device without
  /// resident_calls().
  virtual absl::StatusOr<std::vector<DeviceTensor>>
  CallResident(KernelEntryFn fn, const proto::EntryPoint &ep,
               absl::Span<const DeviceTensor *const> params,
               absl::Span<const DeviceArg> args);

  /// Whether RecordResident is implemented (cuda, cuda-emu: CUDA graphs).
  virtual bool recorded_calls() const { return false; }
  /// Records a call of `fn` with the arguments of CallResident, to be run
  /// by RecordedCall::Replay (nothing is computed by the recording itself:
  /// call Replay for this call too). The host code runs once, so anything
  /// it does on the host (a sampler callback) happens once. Errors: those
  /// of CallResident's checks; Unimplemented on a device without
  /// recorded_calls(), for a host in-out input or a non-dense output; the
  /// device's when the host code does what a recording cannot hold (cuda: a
  /// synchronous copy, e.g. a host-sampled step).
  virtual absl::StatusOr<std::unique_ptr<RecordedCall>>
  RecordResident(KernelEntryFn fn, const proto::EntryPoint &ep,
                 absl::Span<const DeviceTensor *const> params,
                 absl::Span<const DeviceArg> args);

  /// The traffic counted since the device was opened (DeviceTraffic).
  virtual DeviceTraffic traffic() const { return {}; }

  /// Ends what the device keeps for the sampler `handle` (sampler_callback.h)
  /// after a generation: a device that sampled on the device (cuda,
  /// cuda-emu: SamplerCallbackTarget::StepOnDevice) reads its per-row error
  /// flags once and frees them. Errors: InvalidArgument when a row's logits
  /// held a NaN in a step sampled on the device. The default has nothing.
  virtual absl::Status EndSampling(int64_t handle) { return absl::OkStatus(); }

  /// Prepares, before a generation's first step and outside any recording,
  /// what the device keeps for the sampler `handle` for up to `rows` rows
  /// [B] (cuda, cuda-emu: the per-row state of the sampling kernels,
  /// allocated and zeroed), so that the first block's sampler steps allocate
  /// and copy nothing and can be captured into a CUDA graph (docs/generation.md
  /// "CUDA graphs"). Errors: the device pool's. The default has nothing.
  virtual absl::Status BeginSampling(int64_t handle, int64_t rows) {
    return absl::OkStatus();
  }

  /// Opens a span in which the params passed to Call / CallResident do not
  /// change: nothing writes their memory, through any alias, until the
  /// matching EndConstantParams. The device may then keep derived forms of
  /// them for the span (cpu: weights packed for the small-M GEMMs of
  /// decoding, device/cpu/small_gemm.h). Spans nest; the derived forms are
  /// dropped when the outermost one ends. Use ConstantParamsScope. The
  /// default keeps nothing.
  virtual void BeginConstantParams() {}
  virtual void EndConstantParams() {}

  /// Sets how many host threads the device's computation may use (`threads`
  /// > 0; 0 keeps the current count) and returns the count in effect
  /// afterwards. cpu: the OpenMP threads of the generated kernels' parallel
  /// loops and OpenBLAS's threads (the kernels' GEMMs), set alike; returns
  /// the OpenMP count (docs/codegen.md, "Threads"). The default, for a
  /// device that computes on no host threads of its own, sets nothing and
  /// returns 0.
  virtual int SetThreads(int threads) { return 0; }

protected:
  /// The checks of CopyOnDevice: the bytes to copy, or InvalidArgument
  /// (dtype or element count differ, partial overlap).
  absl::StatusOr<int64_t> CheckCopy(const DeviceTensor &src,
                                    const DeviceTensor &dst) const;
};

/// Whether state (generation's KV caches and tokens, training's parameters
/// and AdamW moments) stays resident on `device` across calls: the device
/// has resident_calls() and the environment variable BT_RESIDENT_STATE is
/// not "0" (the switch that copies the state in and out of every call
/// instead, for comparisons; docs/codegen-cuda.md).
bool ResidentStateEnabled(const Device &device);

/// Device::BeginConstantParams for the scope's lifetime (e.g. one
/// generation: its params are the model's weights, which no entry point of
/// a generation writes).
class ConstantParamsScope {
public:
  explicit ConstantParamsScope(Device &device) : device_(device) {
    device_.BeginConstantParams();
  }
  ~ConstantParamsScope() { device_.EndConstantParams(); }
  ConstantParamsScope(const ConstantParamsScope &) = delete;
  ConstantParamsScope &operator=(const ConstantParamsScope &) = delete;

private:
  Device &device_;
};

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_DEVICE_H
