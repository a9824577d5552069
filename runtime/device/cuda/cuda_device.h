//===- cuda_device.h - the CUDA device --------------------------*- C++ -*-===//
//
// The device of cuda artifacts (docs/codegen-cuda.md, docs/abi.md "Kernel
// library (CUDA target)") over a CudaBackend (device/cuda/cuda.h): LoadCode
// loads the ptx section into the GPU and the kernels section, the entry
// points' host code, into this process; resident tensors are copies in the
// device memory pool; a call copies the host arguments to the device and
// the in-out ones and the outputs back (CallDeviceEntryPoint), one call at a
// time. Nothing of it has run on a GPU yet (issue 6).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_CUDA_CUDA_DEVICE_H
#define BT_RUNTIME_DEVICE_CUDA_CUDA_DEVICE_H

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/device/device.h"

namespace bt::rt {

class CudaDevice : public Device {
public:
  /// Opens the GPU (CudaBackend::Open with `options`). Errors: those of
  /// CudaBackend::Open (NotFound without a driver, Unavailable without a
  /// usable GPU).
  static absl::StatusOr<std::unique_ptr<CudaDevice>>
  Open(const CudaOptions &options = {});

  /// What a cuda artifact must hold before a GPU is opened for it: a ptx
  /// section when it has entry points. Errors: InvalidArgument "<path>: the
  /// cuda artifact has entry points but no ptx section".
  static absl::Status CheckArtifact(const Artifact &artifact);

  /// What the emulated device (CudaOptions::emulated, the cuda-emu driver
  /// of exec/drivers.h) needs instead: a cuda_emu section when the artifact
  /// has entry points. Errors: FailedPrecondition "<path>: --device
  /// cuda-emu: the artifact has no cuda_emu section ...".
  static absl::Status CheckEmulatorArtifact(const Artifact &artifact);

  /// "cuda", or "cuda-emu" on the emulated device.
  std::string name() const override;
  /// CudaDeviceInfo::Describe of the GPU.
  std::string Describe() const override;
  /// Loads the ptx section (the emulator: the cuda_emu section) with CudaBackend::LoadModule, makes the backend the
  /// one the host code's bt_gpu_* calls use, and loads the kernels section
  /// (the host code). Errors: those of CheckArtifact, the driver's JIT
  /// errors prefixed with the artifact path, and those of
  /// KernelLibrary::Load.
  absl::StatusOr<std::unique_ptr<KernelLibrary>>
  LoadCode(const Artifact &artifact) override;
  absl::StatusOr<DeviceTensor> Allocate(DType dtype,
                                        const std::vector<int64_t> &shape) override;
  /// UploadTensor: a copy in a block of the device memory pool.
  absl::StatusOr<DeviceTensor> Upload(const Tensor &t) override;
  absl::Status Download(const DeviceTensor &src, Tensor &dst) override;
  /// Returns the block to the pool.
  void Release(const DeviceTensor &t) override;
  /// CudaBackend::CopyOnDevice (cuMemcpyDtoDAsync on the stream).
  absl::Status CopyOnDevice(const DeviceTensor &src,
                            const DeviceTensor &dst) override;
  /// CallDeviceEntryPoint, serialized.
  absl::StatusOr<std::vector<Tensor>>
  Call(KernelEntryFn fn, const proto::EntryPoint &ep,
       absl::Span<const DeviceTensor *const> params,
       absl::Span<Tensor *const> args) override;
  absl::Status Synchronize() override;
  bool resident_calls() const override { return true; }
  /// CallDeviceEntryPointResident, serialized; Release of an output returns
  /// its block to the pool once no other output of the call names it.
  absl::StatusOr<std::vector<DeviceTensor>>
  CallResident(KernelEntryFn fn, const proto::EntryPoint &ep,
               absl::Span<const DeviceTensor *const> params,
               absl::Span<const DeviceArg> args) override;
  /// Recorded calls are CUDA graphs: true when the driver has the graph API
  /// (else generation calls every entry directly).
  bool recorded_calls() const override;
  /// RecordDeviceEntryPointResident (a CUDA graph), serialized; replays are
  /// serialized with the other calls.
  absl::StatusOr<std::unique_ptr<RecordedCall>>
  RecordResident(KernelEntryFn fn, const proto::EntryPoint &ep,
                 absl::Span<const DeviceTensor *const> params,
                 absl::Span<const DeviceArg> args) override;
  /// CudaBackend::traffic.
  DeviceTraffic traffic() const override { return gpu_->traffic(); }
  /// EndDeviceSampling.
  absl::Status EndSampling(int64_t handle) override;
  absl::Status BeginSampling(int64_t handle, int64_t rows) override;

  CudaBackend &backend() { return *gpu_; }

private:
  // Outputs of CallResident whose address is not their block's: address →
  // block, and the outputs naming each such block.
  std::multimap<uint64_t, uint64_t> view_block_;
  std::map<uint64_t, int> block_refs_;

  explicit CudaDevice(std::unique_ptr<CudaBackend> gpu) : gpu_(std::move(gpu)) {}
  std::unique_ptr<CudaBackend> gpu_;
  std::mutex mu_;
};

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_CUDA_CUDA_DEVICE_H
