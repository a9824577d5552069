//===- artifact.h - compiled artifacts (docs/abi.md) ------------*- C++ -*-===//
//
// Writing and reading bt artifacts exactly as docs/abi.md specifies:
//
//   [prefix: launcher executable or nothing]
//   payload (payload_start % 4096 == 0):
//     kernels section   (offset 0)
//     weights section   (4096-aligned; each tensor 64-byte aligned)
//     tokenizer section (optional)
//     ptx section       (optional; target cuda: the PTX module)
//     manifest          (serialized bt.proto.Manifest)
//   trailer, 32 bytes:  "BTARTIF2" | u64 payload_start | u64 manifest_offset
//                       | u32 manifest_size | u32 manifest_crc32
//                       (little-endian)
//
// Section and manifest offsets are relative to payload_start; Weight.offset
// is relative to the weights section. Every section records the CRC-32
// (zlib) of its bytes in the manifest (Section.crc32); the trailer records
// the manifest's. Format 1 ("BTARTIF1", u64 manifest_size, no checksums) is
// refused with a request to compile again.
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_ARTIFACT_H
#define BT_RUNTIME_ARTIFACT_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {

inline constexpr char kArtifactMagic[8] = {'B', 'T', 'A', 'R',
                                           'T', 'I', 'F', '2'};
/// The magic of format 1 (before checksums), recognised only to say so.
inline constexpr char kArtifactMagicV1[8] = {'B', 'T', 'A', 'R',
                                             'T', 'I', 'F', '1'};
inline constexpr uint64_t kArtifactTrailerSize = 32;
inline constexpr uint64_t kArtifactPageSize = 4096;
inline constexpr uint32_t kArtifactFormatVersion = 2;

/// Builds an artifact file. Typical use (bt-run compile):
///   ArtifactWriter w(manifest);   // target, cpu, producer, config, entry points
///   w.SetKernels(so_bytes);
///   for (...) BT_RETURN_IF_ERROR(w.AddWeight(name, tensor));
///   w.SetPrefixFile(".../bt-launcher");   // for an executable
///   BT_RETURN_IF_ERROR(w.Write("model"));
class ArtifactWriter {
public:
  /// `manifest` provides target, cpu, producer, config and entry_points;
  /// format_version, weights and the section fields (offset, size, crc32)
  /// are set by Write().
  explicit ArtifactWriter(proto::Manifest manifest);

  /// The kernels section: an ELF shared object (cpu: the kernels; cuda: the
  /// host code that launches the PTX kernels).
  void SetKernels(std::string bytes) { kernels_ = std::move(bytes); }
  /// The ptx section (target cuda): the PTX module of every kernel (text).
  void SetPtx(std::string text) { ptx_ = std::move(text); }
  /// The cuda_emu section (target cuda): the kernels compiled for the CUDA
  /// emulator (a shared object, docs/cuda-emulator.md).
  void SetCudaEmu(std::string so) { cuda_emu_ = std::move(so); }
  /// The tokenizer section (optional) and its format (manifest
  /// tokenizer_kind): a SentencePiece model proto or a tokenizer.json
  /// (bt/runtime/tokenizer.h DetectTokenizerKind).
  void SetTokenizer(std::string bytes, proto::TokenizerKind kind) {
    tokenizer_ = std::move(bytes);
    manifest_.set_tokenizer_kind(kind);
  }
  /// Makes the output an executable: the file at `path` (the bt-launcher
  /// binary) is copied in front of the payload and the result is chmod 0755.
  void SetPrefixFile(std::string path) { prefix_path_ = std::move(path); }

  /// Stores `seed` instead of the weights' bytes (Manifest.random_init):
  /// the weights added by AddWeight are listed (name, dtype, shape) but not
  /// written, and Artifact::GetWeight draws them with RandomInitWeights.
  /// The caller adds exactly the weights RandomInitWeights(config, seed)
  /// returns (Artifact::Open refuses anything else).
  void SetRandomInit(uint64_t seed) {
    manifest_.mutable_random_init()->set_seed(seed);
  }

  /// Adds a weight tensor (the writer shares `t`'s data; no copy until
  /// Write). Errors: InvalidArgument for an empty or duplicate name or an
  /// invalid tensor.
  absl::Status AddWeight(const std::string &name, const Tensor &t);

  /// Writes the artifact atomically (temporary file in the destination
  /// directory, fsync, rename; mode 0755 with a prefix, else 0644).
  /// Errors: I/O errors naming the file (prefix or destination).
  absl::Status Write(const std::string &path) const;

  /// The bytes Write() would store (without a prefix file: SetPrefixFile is
  /// for executables). Errors: Internal when the manifest does not
  /// serialize, FailedPrecondition with a prefix file set.
  absl::StatusOr<std::string> Serialize() const;

  /// The manifest Write() stores for a payload without prefix (for tests and
  /// inspection): sections and weights filled in.
  proto::Manifest LaidOutManifest() const;

private:
  /// Writes prefix, payload, manifest and trailer to `out` (a file writer
  /// or a string; `path` names it in errors).
  template <typename Sink>
  absl::Status Emit(const std::string &path, const std::string &prefix,
                    Sink &out) const;
  struct PendingWeight {
    std::string name;
    Tensor tensor;
  };
  proto::Manifest manifest_;
  std::string kernels_, tokenizer_, ptx_, cuda_emu_, prefix_path_;
  std::vector<PendingWeight> weights_;
  absl::flat_hash_map<std::string, size_t> weight_index_;
};

/// A read-only, fully validated artifact mapped into memory.
class Artifact {
public:
  /// Maps and validates `path` (an artifact, or an executable with an
  /// artifact appended, e.g. /proc/self/exe). Checks, each an
  /// InvalidArgument error naming the file:
  ///  - file shorter than the trailer; bad magic ("no bt artifact");
  ///    FailedPrecondition for format 1 ("BTARTIF1": compile it again);
  ///  - payload_start not 4096-aligned or past the trailer;
  ///  - manifest range past the payload; DataLoss when the manifest's
  ///    CRC-32 differs from the trailer's; manifest does not parse;
  ///  - format_version != 2 (FailedPrecondition: produced by another version);
  ///  - a section (kernels, weights_data, tokenizer, ptx, cuda_emu) past
  ///    the payload, overlapping another section or the manifest;
  ///    weights_data not
  ///    4096-aligned; DataLoss naming the section when its CRC-32 differs
  ///    from the manifest's Section.crc32 (flipped kernel, weight, tokenizer,
  ///    PTX or emulator bytes: the whole file is read once to check);
  ///  - a weight with an unknown dtype, a bad shape, nbytes != numel *
  ///    itemsize, an offset not 64-aligned, a range past the weights
  ///    section, overlapping another weight, or a duplicate name;
  ///  - random_init present (weights drawn at load): a weight whose offset
  ///    is not 0, a non-empty weights section, or a weight list that is not
  ///    ExpectedParams(config) in order, F32, with its shapes;
  ///  - an entry point with an empty or duplicate name, an empty symbol, a
  ///    param that is not a weight, or a tensor spec with an unspecified
  ///    dtype, a dim < -1, a duplicate name, or an output marked inout.
  static absl::StatusOr<std::shared_ptr<const Artifact>>
  Open(const std::string &path);

  /// The artifact held in `bytes` (ArtifactWriter::Serialize), validated as
  /// Open validates a file; `name` stands for the path in messages and
  /// path(). No temporary file: the bytes are copied once into a read-only
  /// page-aligned mapping (weights are views into it). For in-process
  /// callers (bt-run eval/generate/bench): Model::Open(artifact, options).
  static absl::StatusOr<std::shared_ptr<const Artifact>>
  FromBytes(const std::string &name, absl::string_view bytes);

  const std::string &path() const { return file_->path(); }
  const proto::Manifest &manifest() const { return manifest_; }
  uint64_t payload_start() const { return payload_start_; }
  /// Section bytes (views into the mapping).
  absl::string_view kernels() const;
  absl::string_view tokenizer() const;
  absl::string_view ptx() const;
  /// The cuda_emu section (empty when absent).
  absl::string_view cuda_emu() const;

  /// The weight's manifest entry, or nullptr.
  const proto::Weight *FindWeight(const std::string &name) const;
  /// The weight as a borrowed view into the mapping (kept alive by the
  /// tensor). With random_init, the first call draws every weight
  /// (RandomInitWeights: about 10 ns per element, once per artifact; the
  /// artifact owns them) and each call returns a shared view. Errors:
  /// NotFound naming the weight and the file; ResourceExhausted when the
  /// drawn weights cannot be allocated.
  absl::StatusOr<Tensor> GetWeight(const std::string &name) const;
  /// The entry point `name`, or nullptr.
  const proto::EntryPoint *FindEntryPoint(const std::string &name) const;

private:
  /// Validates the artifact in `file` (Open's checks).
  static absl::StatusOr<std::shared_ptr<const Artifact>>
  FromMapping(std::shared_ptr<MappedFile> file);
  Artifact() = default;
  absl::string_view Section(const proto::Section &s) const;
  std::shared_ptr<MappedFile> file_;
  uint64_t payload_start_ = 0;
  proto::Manifest manifest_;
  absl::flat_hash_map<std::string, int> weight_index_;
  /// random_init: the drawn weights (by GetWeight, under drawn_mutex_).
  mutable absl::Mutex drawn_mutex_;
  mutable std::unique_ptr<std::map<std::string, Tensor>> drawn_;
};

} // namespace bt::rt

#endif // BT_RUNTIME_ARTIFACT_H
