//===- drivers.h - the devices this runtime has -----------------*- C++ -*-===//
//
// The registry of device implementations (as IREE's hal/drivers): one entry
// per device, each naming the artifact target it runs and how to check an
// artifact and open the device for it. Everything above the device layer
// opens devices through here and never names a target:
//
//   cpu   device/cpu   CpuDevice   runs target "cpu"
//   cuda  device/cuda  CudaDevice  runs target "cuda"
//   cuda-emu  device/cuda over device/cuda_emu (the CUDA emulator,
//             docs/cuda-emulator.md)  runs target "cuda" on the CPU
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_EXEC_DRIVERS_H
#define BT_RUNTIME_EXEC_DRIVERS_H

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/device/device.h"
#include "bt/runtime/model/artifact.h"

namespace bt::rt {

/// How to open a device.
struct DeviceOptions {
  /// The device by name ("cpu", "cuda", "cuda-emu"); empty: the device of
  /// the artifact's target (a cuda artifact: cuda-emu when $BT_DEVICE is
  /// "cuda-emu").
  std::string device;
  /// For the cuda device: driver, cuBLAS and ordinal.
  CudaOptions cuda;
  /// The dtype the caller expects the artifact's kernels to compute in
  /// (`--dtype f32|bf16` of the launcher's commands); empty: any.
  /// OpenDeviceFor refuses an artifact of another (CheckArtifactDType).
  std::string dtype;
};

/// The dtype of an artifact's kernels: "bf16" for a `--target cuda --dtype
/// bf16` artifact (an entry point takes bf16 weights: EntryPoint.param_dtypes,
/// docs/abi.md), else "f32".
std::string ArtifactDType(const Artifact &artifact);

/// OK when `dtype` is empty or ArtifactDType(artifact). InvalidArgument for
/// a dtype other than f32 and bf16 ("--dtype f16: expected f32 or bf16"),
/// and for an artifact of the other dtype, naming its path and how to get
/// the one asked for: the kernels are compiled for one dtype ("<path>:
/// --dtype f32: this artifact's kernels were compiled with --dtype bf16;
/// compile the checkpoint again with `bt-run compile --target cuda --dtype
/// f32`").
absl::Status CheckArtifactDType(const Artifact &artifact,
                                const std::string &dtype);

/// Opens the device that runs `artifact` (options.device, or the one of the
/// artifact's target) after checking that the artifact holds what that
/// device needs (a kernels section when it has entry points; cuda: a ptx
/// section), so that an artifact missing a part says so before a device is
/// opened, and that its kernels' dtype is options.dtype (CheckArtifactDType).
/// Errors, each naming the artifact path:
///   Unimplemented for a target no device runs ("artifact target 'rocm' is
///     not supported by this runtime (it runs 'cpu' and 'cuda' artifacts)");
///   InvalidArgument for an unknown options.device or one that does not run
///     the artifact's target, and for a missing section;
///   the device's: cuda, Unavailable "<path>: this artifact runs on a CUDA
///     GPU (target cuda, sm_90); no CUDA GPU found: ..." when there is no
///     driver or no usable GPU.
absl::StatusOr<std::unique_ptr<Device>>
OpenDeviceFor(const Artifact &artifact, const DeviceOptions &options = {});

/// The names of this runtime's devices (DeviceOptions::device), in order:
/// "cpu", "cuda", "cuda-emu".
std::vector<std::string> DeviceNames();

/// One line per device of this runtime, for `devices`: "cpu: 2 hardware
/// threads", then "cuda: device 0: NVIDIA H100 ..." or "cuda: no CUDA GPU
/// found: ...".
std::vector<std::string> DescribeDevices(const DeviceOptions &options = {});

} // namespace bt::rt

#endif // BT_RUNTIME_EXEC_DRIVERS_H
