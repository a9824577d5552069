//===- drivers.cc - the devices this runtime has ---------------------------===//

#include "bt/runtime/exec/drivers.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/device/cpu/cpu_device.h"
#include "bt/runtime/device/cuda/cuda_device.h"
#include "bt/runtime/device/cuda_emu/cuda_emu.h"

namespace bt::rt {
namespace {

struct Driver {
  const char *name;   // DeviceOptions::device
  const char *target; // the Manifest.target it runs
  /// What the artifact must hold for this device (before opening it).
  absl::Status (*check)(const Artifact &artifact);
  absl::StatusOr<std::unique_ptr<Device>> (*open)(const Artifact &artifact,
                                                  const DeviceOptions &options);
  /// One line for `devices`.
  std::string (*describe)(const DeviceOptions &options);
};

absl::Status NoCheck(const Artifact &) { return absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<Device>> OpenCpu(const Artifact &,
                                                const DeviceOptions &) {
  return std::unique_ptr<Device>(new CpuDevice());
}

std::string DescribeCpu(const DeviceOptions &) {
  return absl::StrCat("cpu: ", std::thread::hardware_concurrency(),
                      " hardware threads");
}

// The CUDA emulator (device/cuda_emu, docs/cuda-emulator.md): the CUDA
// device over the emulator's driver API and cuBLAS in this process.
CudaOptions EmulatorOptions(const DeviceOptions &options) {
  CudaOptions o = options.cuda;
  o.symbols = [](const char *name) { return cuda_emu::LookupSymbol(name); };
  o.symbols_name = cuda_emu::kDeviceName;
  o.emulated = true;
  return o;
}

absl::StatusOr<std::unique_ptr<Device>>
OpenCudaEmu(const Artifact &artifact, const DeviceOptions &options) {
  absl::StatusOr<std::unique_ptr<CudaDevice>> d =
      CudaDevice::Open(EmulatorOptions(options));
  if (!d.ok())
    return absl::Status(d.status().code(),
                        absl::StrCat(artifact.path(), ": the CUDA emulator: ",
                                     d.status().message()));
  return std::unique_ptr<Device>(std::move(*d));
}

std::string DescribeCudaEmu(const DeviceOptions &options) {
  const std::string described =
      DescribeCudaAvailability(EmulatorOptions(options));
  absl::string_view line = described;
  absl::ConsumePrefix(&line, "cuda: ");
  return absl::StrCat("cuda-emu: ", line,
                      " (the CUDA emulator: a cuda artifact's kernels on the "
                      "CPU, docs/cuda-emulator.md)");
}

absl::StatusOr<std::unique_ptr<Device>> OpenCuda(const Artifact &artifact,
                                                 const DeviceOptions &options) {
  absl::StatusOr<std::unique_ptr<CudaDevice>> gpu =
      CudaDevice::Open(options.cuda);
  if (gpu.ok())
    return std::unique_ptr<Device>(std::move(*gpu));
  // "no CUDA GPU found: ..." in every case (no driver, no device).
  std::string why(gpu.status().message());
  constexpr absl::string_view kNoDriver = "no CUDA driver found: ";
  if (absl::StartsWith(why, kNoDriver))
    why = absl::StrCat("the CUDA driver cannot be loaded: ",
                       why.substr(kNoDriver.size()));
  if (!absl::StartsWith(why, "no CUDA GPU found"))
    why = absl::StrCat("no CUDA GPU found: ", why);
  const std::string &chip = artifact.manifest().gpu_chip();
  return absl::UnavailableError(absl::StrCat(
      artifact.path(), ": this artifact runs on a CUDA GPU (target cuda",
      chip.empty() ? "" : ", ", chip, "); ", why));
}

std::string DescribeCuda(const DeviceOptions &options) {
  return DescribeCudaAvailability(options.cuda);
}

constexpr Driver kDrivers[] = {
    {"cpu", "cpu", NoCheck, OpenCpu, DescribeCpu},
    {"cuda", "cuda", CudaDevice::CheckArtifact, OpenCuda, DescribeCuda},
    {cuda_emu::kDeviceName, "cuda", CudaDevice::CheckEmulatorArtifact,
     OpenCudaEmu, DescribeCudaEmu},
};

std::string EnvOr(const char *name) {
  const char *v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

} // namespace

std::string ArtifactDType(const Artifact &artifact) {
  for (const proto::EntryPoint &ep : artifact.manifest().entry_points())
    for (int d : ep.param_dtypes())
      if (d == proto::BF16)
        return "bf16";
  return "f32";
}

absl::Status CheckArtifactDType(const Artifact &artifact,
                                const std::string &dtype) {
  if (dtype.empty())
    return absl::OkStatus();
  if (dtype != "f32" && dtype != "bf16")
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype ", dtype, ": expected f32 or bf16"));
  const std::string has = ArtifactDType(artifact);
  if (has == dtype)
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      artifact.path(), ": --dtype ", dtype,
      ": this artifact's kernels were compiled with --dtype ", has,
      " (an artifact holds the kernels of one dtype); compile the checkpoint "
      "again with `bt-run compile <checkpoint> --target ",
      artifact.manifest().target(), " --dtype ", dtype, "`"));
}

absl::StatusOr<std::unique_ptr<Device>>
OpenDeviceFor(const Artifact &artifact, const DeviceOptions &options) {
  const proto::Manifest &m = artifact.manifest();
  BT_RETURN_IF_ERROR(CheckArtifactDType(artifact, options.dtype));
  // $BT_DEVICE=cuda-emu runs cuda artifacts on the emulator when no device
  // is named (scripts/gpu_check.sh through the emulator).
  std::string device = options.device;
  if (device.empty() && EnvOr("BT_DEVICE") == cuda_emu::kDeviceName &&
      m.target() == "cuda")
    device = cuda_emu::kDeviceName;
  const Driver *driver = nullptr;
  std::vector<std::string> targets, names;
  for (const Driver &d : kDrivers) {
    const std::string t = absl::StrCat("'", d.target, "'");
    if (std::find(targets.begin(), targets.end(), t) == targets.end())
      targets.push_back(t);
    names.push_back(d.name);
    if (driver == nullptr && (device.empty() ? d.target == m.target()
                                             : d.name == device))
      driver = &d;
  }
  if (driver == nullptr && device.empty())
    return absl::UnimplementedError(absl::StrCat(
        artifact.path(), ": artifact target '", m.target(),
        "' is not supported by this runtime (it runs ",
        absl::StrJoin(targets, " and "), " artifacts)"));
  if (driver == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown device '", device, "' (this runtime has ",
        absl::StrJoin(names, ", "), ")"));
  if (driver->target != m.target())
    return absl::InvalidArgumentError(absl::StrCat(
        artifact.path(), ": --device ", driver->name,
        ": the artifact's target is ", m.target(), " (compile it with --target ",
        driver->target, ")"));
  if (m.entry_points_size() > 0 && m.kernels().size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        artifact.path(), ": the artifact has entry points but no kernels section"));
  BT_RETURN_IF_ERROR(driver->check(artifact));
  return driver->open(artifact, options);
}

std::vector<std::string> DeviceNames() {
  std::vector<std::string> names;
  for (const Driver &d : kDrivers)
    names.push_back(d.name);
  return names;
}

std::vector<std::string> DescribeDevices(const DeviceOptions &options) {
  std::vector<std::string> lines;
  for (const Driver &d : kDrivers)
    lines.push_back(d.describe(options));
  return lines;
}

} // namespace bt::rt
