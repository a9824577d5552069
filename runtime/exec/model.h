//===- model.h - a loaded artifact, ready to run ----------------*- C++ -*-===//
//
// A Model is an artifact (docs/abi.md; a file, or /proc/self/exe for a
// standalone executable) loaded onto a Device
// (device/device.h, opened through exec/drivers.h for the artifact's
// target): its code loaded, every entry point's params resident on the
// device (on the CPU: the mmapped weights themselves, no copy). It runs
// entry points by name with named host tensors (names = fixture tensor
// names, e.g. input_ids, attention_mask, block_attention_mask, labels ->
// logits, loss) and knows no target: what differs between devices is the
// Device's business.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_EXEC_MODEL_H
#define BT_RUNTIME_EXEC_MODEL_H

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"
#include "bt/runtime/device/device.h"
#include "bt/runtime/exec/drivers.h"
#include "bt/runtime/device/kernels.h"
#include "bt/runtime/model/artifact.h"

namespace bt::rt {

/// Named tensors (inputs or outputs of an entry point), ordered by name.
using TensorMap = std::map<std::string, Tensor>;

/// The path of the running executable, whose tail holds the artifact of a
/// standalone executable.
inline constexpr char kSelfExe[] = "/proc/self/exe";

class Model {
public:
  /// Opens `artifact_path` (Artifact::Open validation) and loads it:
  /// Open(artifact, options).
  static absl::StatusOr<std::unique_ptr<Model>>
  Open(const std::string &artifact_path, const DeviceOptions &options = {});
  /// Loads `artifact` (already opened, e.g. shared by several Models) onto
  /// the device of OpenDeviceFor(artifact,
  /// options): Device::LoadCode, every entry point's symbol resolved, every
  /// param made resident (Device::Upload, once per weight). Errors: those
  /// of OpenDeviceFor (an unsupported target, a missing section, no GPU)
  /// and Device::LoadCode; NotFound for an entry point whose symbol the
  /// kernels do not export; the device's for a weight that does not upload
  /// ("<path>: uploading weight 'w' to device cuda: ...").
  static absl::StatusOr<std::unique_ptr<Model>>
  Open(std::shared_ptr<const Artifact> artifact,
       const DeviceOptions &options = {});

  /// Open(kSelfExe): the artifact appended to the running executable.
  static absl::StatusOr<std::unique_ptr<Model>> OpenSelf() {
    return Open(kSelfExe);
  }

  const Artifact &artifact() const { return *artifact_; }
  const proto::Manifest &manifest() const { return artifact_->manifest(); }
  const proto::ModelConfig &config() const { return manifest().config(); }
  /// The device the entry points run on (Device::name(): "cpu", "cuda").
  Device &device() const { return *device_; }
  /// Entry point names, in manifest order.
  std::vector<std::string> EntryPointNames() const;
  /// The entry point `name`, or nullptr.
  const proto::EntryPoint *FindEntryPoint(const std::string &name) const {
    return artifact_->FindEntryPoint(name);
  }

  /// Checks the arguments of entry `ep`: `inputs` holds the read-only
  /// inputs, `inouts` the in-out ones (TensorSpec.inout: buffers the caller
  /// owns and the kernel updates in place, e.g. kv_cache / kv_valid of the
  /// generation entry points, docs/generation.md). Every spec'd argument
  /// present in the right map, no other names, dtype equal, rank equal,
  /// static dims (>= 0) equal, dims sharing a TensorSpec.dim_names name equal
  /// across all arguments, and the values of the token tensors of
  /// docs/abi.md that kernels index with: input_ids in [0, vocab_size),
  /// labels in [0, vocab_size) or -100, attention_mask /
  /// block_attention_mask 0 or 1 (I64 only). In-out buffers must not overlap
  /// any other argument. When the entry takes `cache_length` (I64 scalar;
  /// an input, or in-out where the length stays on the device) and in-out
  /// caches, 0 <= cache_length and cache_length + S <= C, where
  /// S = input_ids dim 1 (the entries the call appends: blocks or tokens)
  /// and C is every in-out dim named "C" (without dim names: kv_valid dim 1,
  /// kv_cache dim rank-2), so a kernel never writes past a cache.
  /// Errors: InvalidArgument such as
  ///   entry point 'eval': input 'input_ids' has shape [2, 6, 5], expected
  ///   [-1, -1, 4] (dim 2 must be 4)
  ///   entry point 'eval': input 'attention_mask' dim 1 (N_blk = 5) disagrees
  ///   with input 'input_ids' dim 1 (N_blk = 6)
  ///   entry point 'eval': input 'input_ids' has value 512 at flat index 3,
  ///   expected a token id in [0, 512)
  ///   entry point 'prefill': missing in-out argument 'kv_cache' (F32[-1, 2,
  ///   2, 2, -1, 32]; a writable buffer owned by the caller)
  ///   entry point 'decode_block': cache_length 7 + 1 new entries exceed
  ///   in-out 'kv_valid' capacity C = 7
  absl::Status CheckInputs(const proto::EntryPoint &ep, const TensorMap &inputs,
                           const TensorMap *inouts = nullptr) const;

  /// Runs entry point `entry` with `inputs` and, for entries with in-out
  /// arguments, `inouts` (CheckInputs first; the in-out buffers are updated
  /// in place and are not among the returned outputs) and returns its
  /// outputs by name (owning host tensors; Device::Call: on a GPU, host
  /// inputs and in-out buffers are copied to the device and back around the
  /// call).
  /// Errors: NotFound for
  /// an unknown entry (the message lists the known ones), the errors of
  /// CheckInputs and CallEntryPoint, and an output whose named dim disagrees
  /// with the arguments (InvalidArgument). Thread-safe: kernels keep no state
  /// (docs/abi.md); in-out buffers must not be shared between concurrent
  /// calls.
  ///
  /// `params`, when given, replaces the artifact's weights by name for this
  /// call (e.g. the parameters being trained, for eval_loss during
  /// training; bt/runtime/train.h): a replacement must have the weight's
  /// dtype and shape (InvalidArgument otherwise, naming it); names the entry
  /// does not take are ignored.
  absl::StatusOr<TensorMap> Run(const std::string &entry,
                                const TensorMap &inputs,
                                TensorMap *inouts = nullptr,
                                const TensorMap *params = nullptr) const;

  /// Run with the state on the device (Device::resident_calls(): cuda,
  /// cuda-emu; the generation loop, runtime/generate): each input of the
  /// entry is either in `inputs` (host tensors copied in for the call: token
  /// ids, scalars) or in `resident` (tensors on device(), used in place: the
  /// KV caches, updated in place, the context, the positions). Returns the
  /// outputs on the device by name, owned by the caller (release each with
  /// device().Release). No value checks (CheckInputs needs the host data):
  /// the caller builds valid arguments. Errors: NotFound for an unknown
  /// entry; InvalidArgument for an input in neither map or in both; those of
  /// Device::CallResident (Unimplemented on a device without resident
  /// calls).
  absl::StatusOr<std::map<std::string, DeviceTensor>>
  RunResident(const std::string &entry, const TensorMap &inputs,
              const std::map<std::string, const DeviceTensor *> &resident) const;

  /// RunResident recorded for replays (Device::RecordResident: on cuda a
  /// CUDA graph; the generation loop's decode_tokens): the host code runs
  /// once, under the recording, with `inputs` and `resident` as RunResident
  /// takes them, and nothing is computed until RecordedEntry::Replay. The
  /// recording must not outlive the model. Errors: those of RunResident's
  /// argument mapping and of Device::RecordResident (Unimplemented on a
  /// device without recorded calls).
  class RecordedEntry;
  absl::StatusOr<std::unique_ptr<RecordedEntry>>
  RecordResident(const std::string &entry, const TensorMap &inputs,
                 const std::map<std::string, const DeviceTensor *> &resident) const;

  /// Releases the resident params.
  ~Model();
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

private:
  Model() = default;
  /// The entry's inputs as DeviceArgs (ep.inputs() order) from the two maps.
  absl::StatusOr<std::vector<DeviceArg>>
  ResidentArgs(const proto::EntryPoint &ep, const TensorMap &inputs,
               const std::map<std::string, const DeviceTensor *> &resident) const;
  absl::StatusOr<const proto::EntryPoint *> Entry(const std::string &entry) const;
  /// The entry's params on the device (ep.params() order).
  std::vector<const DeviceTensor *> ResidentParams(const proto::EntryPoint &ep) const;
  std::shared_ptr<const Artifact> artifact_;
  // Declared before what lives on it, so that it is destroyed last.
  std::unique_ptr<Device> device_;
  std::unique_ptr<KernelLibrary> kernels_;
  std::map<std::string, KernelEntryFn> entries_;
  std::map<std::string, Tensor> weights_; // host views into the artifact
  std::map<std::string, DeviceTensor> resident_; // weights_ on device_
};

/// A recording of Model::RecordResident: Replay runs the entry again on
/// inputs named as for RunResident (same dtypes and shapes; host scalars
/// with the recorded values; in-out inputs the same tensors), and the
/// outputs are the recording's (RecordedCall: rewritten by each replay,
/// never released by the caller).
class Model::RecordedEntry {
public:
  absl::Status Replay(const TensorMap &inputs,
                      const std::map<std::string, const DeviceTensor *> &resident);
  /// The outputs by name (views of the recording's tensors).
  std::map<std::string, DeviceTensor> outputs() const;
  int64_t nodes() const { return call_->nodes(); }

private:
  friend class Model;
  const Model *model_ = nullptr;
  const proto::EntryPoint *ep_ = nullptr;
  std::unique_ptr<RecordedCall> call_;
};

} // namespace bt::rt

#endif // BT_RUNTIME_EXEC_MODEL_H
