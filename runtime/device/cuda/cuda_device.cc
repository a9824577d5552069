//===- cuda_device.cc - the CUDA device ------------------------------------===//

#include "bt/runtime/device/cuda/cuda_device.h"

#include "absl/strings/str_cat.h"
#include "bt/runtime/base/status_macros.h"

namespace bt::rt {

absl::StatusOr<std::unique_ptr<CudaDevice>>
CudaDevice::Open(const CudaOptions &options) {
  BT_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> gpu,
                      CudaBackend::Open(options));
  return std::unique_ptr<CudaDevice>(new CudaDevice(std::move(gpu)));
}

std::string CudaDevice::Describe() const { return gpu_->device().Describe(); }

absl::Status CudaDevice::CheckArtifact(const Artifact &artifact) {
  if (artifact.manifest().entry_points_size() > 0 &&
      artifact.manifest().ptx().size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        artifact.path(), ": the cuda artifact has entry points but no ptx section"));
  return absl::OkStatus();
}

absl::Status CudaDevice::CheckEmulatorArtifact(const Artifact &artifact) {
  if (artifact.manifest().entry_points_size() > 0 &&
      artifact.manifest().cuda_emu().size() == 0)
    return absl::FailedPreconditionError(absl::StrCat(
        artifact.path(),
        ": --device cuda-emu: the artifact has no cuda_emu section (the "
        "kernels for the CUDA emulator); compile it again with this bt-run"));
  return absl::OkStatus();
}

std::string CudaDevice::name() const {
  return gpu_->emulated() ? "cuda-emu" : "cuda";
}

absl::StatusOr<std::unique_ptr<KernelLibrary>>
CudaDevice::LoadCode(const Artifact &artifact) {
  const bool emulated = gpu_->emulated();
  BT_RETURN_IF_ERROR(emulated ? CheckEmulatorArtifact(artifact)
                              : CheckArtifact(artifact));
  // The module image: the PTX, or on the emulator the same kernels compiled
  // for the host (the cuda_emu section, docs/cuda-emulator.md).
  const absl::string_view image =
      emulated ? artifact.cuda_emu() : artifact.ptx();
  if (!image.empty()) {
    absl::Status s = gpu_->LoadModule(image);
    if (!s.ok())
      return absl::Status(s.code(),
                          absl::StrCat(artifact.path(), ": ", s.message()));
  }
  gpu_->MakeCurrent();
  return KernelLibrary::Load(artifact.kernels(), artifact.path());
}

absl::StatusOr<DeviceTensor>
CudaDevice::Allocate(DType dtype, const std::vector<int64_t> &shape) {
  BT_ASSIGN_OR_RETURN(int64_t n, NumElements(shape, DTypeSize(dtype)));
  DeviceTensor d{0, dtype, shape};
  BT_ASSIGN_OR_RETURN(
      d.address, gpu_->pool().Allocate(n * static_cast<int64_t>(DTypeSize(dtype))));
  return d;
}

absl::StatusOr<DeviceTensor> CudaDevice::Upload(const Tensor &t) {
  return UploadTensor(*gpu_, t);
}

absl::Status CudaDevice::Download(const DeviceTensor &src, Tensor &dst) {
  if (dst.dtype() != src.dtype || dst.shape() != src.shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda: downloading ", DTypeName(src.dtype), ShapeToString(src.shape),
        " into ", dst.DebugString()));
  return gpu_->CopyToHost(dst.data(), src.address,
                          static_cast<int64_t>(dst.nbytes()));
}

absl::Status CudaDevice::CopyOnDevice(const DeviceTensor &src,
                                      const DeviceTensor &dst) {
  BT_ASSIGN_OR_RETURN(int64_t bytes, CheckCopy(src, dst));
  if (src.address == dst.address)
    return absl::OkStatus();
  return gpu_->CopyOnDevice(dst.address, src.address, bytes);
}

void CudaDevice::Release(const DeviceTensor &t) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t block = t.address;
  if (auto it = view_block_.find(t.address); it != view_block_.end()) {
    block = it->second;
    view_block_.erase(it);
  }
  if (auto it = block_refs_.find(block); it != block_refs_.end()) {
    if (--it->second > 0)
      return;
    block_refs_.erase(it);
  }
  (void)gpu_->pool().Free(block);
}

absl::StatusOr<std::vector<DeviceTensor>>
CudaDevice::CallResident(KernelEntryFn fn, const proto::EntryPoint &ep,
                         absl::Span<const DeviceTensor *const> params,
                         absl::Span<const DeviceArg> args) {
  std::lock_guard<std::mutex> lock(mu_);
  BT_ASSIGN_OR_RETURN(std::vector<ResidentOutput> outs,
                      CallDeviceEntryPointResident(*gpu_, fn, ep, params, args));
  std::vector<DeviceTensor> result;
  for (ResidentOutput &o : outs) {
    if (o.block != 0) {
      ++block_refs_[o.block];
      if (o.tensor.address != o.block)
        view_block_.emplace(o.tensor.address, o.block);
    }
    result.push_back(std::move(o.tensor));
  }
  // A block named once needs no count.
  for (const ResidentOutput &o : outs)
    if (auto it = block_refs_.find(o.block); it != block_refs_.end() && it->second == 1)
      block_refs_.erase(it);
  return result;
}

absl::StatusOr<std::vector<Tensor>>
CudaDevice::Call(KernelEntryFn fn, const proto::EntryPoint &ep,
                 absl::Span<const DeviceTensor *const> params,
                 absl::Span<Tensor *const> args) {
  std::lock_guard<std::mutex> lock(mu_);
  return CallDeviceEntryPoint(*gpu_, fn, ep, params, args);
}

namespace {

// A DeviceRecording behind the device's lock.
class CudaRecordedCall : public RecordedCall {
public:
  CudaRecordedCall(std::mutex &mu, std::unique_ptr<DeviceRecording> rec)
      : mu_(mu), rec_(std::move(rec)) {}
  ~CudaRecordedCall() override {
    std::lock_guard<std::mutex> lock(mu_);
    rec_.reset();
  }
  absl::Status Replay(absl::Span<const DeviceArg> args) override {
    std::lock_guard<std::mutex> lock(mu_);
    return rec_->Replay(args);
  }
  const std::vector<DeviceTensor> &outputs() const override {
    return rec_->outputs();
  }
  int64_t nodes() const override { return rec_->nodes(); }

private:
  std::mutex &mu_;
  std::unique_ptr<DeviceRecording> rec_;
};

} // namespace

absl::StatusOr<std::unique_ptr<RecordedCall>>
CudaDevice::RecordResident(KernelEntryFn fn, const proto::EntryPoint &ep,
                           absl::Span<const DeviceTensor *const> params,
                           absl::Span<const DeviceArg> args) {
  std::lock_guard<std::mutex> lock(mu_);
  BT_ASSIGN_OR_RETURN(std::unique_ptr<DeviceRecording> rec,
                      RecordDeviceEntryPointResident(*gpu_, fn, ep, params, args));
  return std::unique_ptr<RecordedCall>(
      std::make_unique<CudaRecordedCall>(mu_, std::move(rec)));
}

bool CudaDevice::recorded_calls() const { return gpu_->has_graphs(); }

absl::Status CudaDevice::Synchronize() { return gpu_->Synchronize(); }

absl::Status CudaDevice::BeginSampling(int64_t handle, int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  return BeginDeviceSampling(*gpu_, handle, rows);
}

absl::Status CudaDevice::EndSampling(int64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  return EndDeviceSampling(*gpu_, handle);
}

} // namespace bt::rt
