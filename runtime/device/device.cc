//===- device.cc - the device interface's shared parts --------------------===//

#include "bt/runtime/device/device.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <cstring>

namespace bt::rt {

DeviceTraffic DeviceTraffic::Since(const DeviceTraffic &since) const {
  DeviceTraffic d;
  d.to_device_copies = to_device_copies - since.to_device_copies;
  d.to_device_bytes = to_device_bytes - since.to_device_bytes;
  d.to_host_copies = to_host_copies - since.to_host_copies;
  d.to_host_bytes = to_host_bytes - since.to_host_bytes;
  d.sampler_bytes = sampler_bytes - since.sampler_bytes;
  d.kernel_launches = kernel_launches - since.kernel_launches;
  d.gemm_calls = gemm_calls - since.gemm_calls;
  d.graph_launches = graph_launches - since.graph_launches;
  d.graph_nodes = graph_nodes - since.graph_nodes;
  d.device_copies = device_copies - since.device_copies;
  d.driver_allocations = driver_allocations - since.driver_allocations;
  d.driver_frees = driver_frees - since.driver_frees;
  d.global_bytes_read = global_bytes_read - since.global_bytes_read;
  d.global_bytes_written = global_bytes_written - since.global_bytes_written;
  d.global_access_bytes = global_access_bytes - since.global_access_bytes;
  d.gemm_flops = gemm_flops - since.gemm_flops;
  return d;
}

DeviceTraffic &DeviceTraffic::operator+=(const DeviceTraffic &d) {
  to_device_copies += d.to_device_copies;
  to_device_bytes += d.to_device_bytes;
  to_host_copies += d.to_host_copies;
  to_host_bytes += d.to_host_bytes;
  sampler_bytes += d.sampler_bytes;
  kernel_launches += d.kernel_launches;
  gemm_calls += d.gemm_calls;
  graph_launches += d.graph_launches;
  graph_nodes += d.graph_nodes;
  device_copies += d.device_copies;
  driver_allocations += d.driver_allocations;
  driver_frees += d.driver_frees;
  global_bytes_read += d.global_bytes_read;
  global_bytes_written += d.global_bytes_written;
  global_access_bytes += d.global_access_bytes;
  gemm_flops += d.gemm_flops;
  return *this;
}

absl::StatusOr<int64_t> Device::CheckCopy(const DeviceTensor &src,
                                          const DeviceTensor &dst) const {
  auto elements = [](const std::vector<int64_t> &shape) -> int64_t {
    int64_t n = 1;
    for (int64_t d : shape)
      n = d < 0 ? -1 : n * d;
    return n;
  };
  const int64_t n = elements(src.shape);
  if (src.dtype != dst.dtype || n < 0 || n != elements(dst.shape))
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": copying ", DTypeName(src.dtype), ShapeToString(src.shape),
        " into ", DTypeName(dst.dtype), ShapeToString(dst.shape),
        " on the device (expected the same dtype and element count)"));
  const int64_t bytes = n * static_cast<int64_t>(DTypeSize(src.dtype));
  if (bytes > 0 && src.address != dst.address &&
      src.address < dst.address + static_cast<uint64_t>(bytes) &&
      dst.address < src.address + static_cast<uint64_t>(bytes))
    return absl::InvalidArgumentError(absl::StrCat(
        name(), ": the source and destination of a copy on the device overlap"));
  return bytes;
}

absl::Status Device::CopyOnDevice(const DeviceTensor &src,
                                  const DeviceTensor &dst) {
  return absl::UnimplementedError(
      absl::StrCat("device ", name(), " cannot copy within its memory"));
}

absl::StatusOr<std::unique_ptr<RecordedCall>>
Device::RecordResident(KernelEntryFn, const proto::EntryPoint &ep,
                       absl::Span<const DeviceTensor *const>,
                       absl::Span<const DeviceArg>) {
  return absl::UnimplementedError(absl::StrCat(
      "device ", name(), " cannot record entry point '", ep.name(),
      "' for replays"));
}

absl::StatusOr<std::vector<DeviceTensor>>
Device::CallResident(KernelEntryFn, const proto::EntryPoint &ep,
                     absl::Span<const DeviceTensor *const>,
                     absl::Span<const DeviceArg>) {
  return absl::UnimplementedError(
      absl::StrCat("entry point '", ep.name(), "': the ", name(),
                   " device keeps no tensors resident across calls"));
}

bool ResidentStateEnabled(const Device &device) {
  const char *env = std::getenv("BT_RESIDENT_STATE");
  return device.resident_calls() &&
         !(env != nullptr && std::strcmp(env, "0") == 0);
}

} // namespace bt::rt
