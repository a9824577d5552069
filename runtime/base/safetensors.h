//===- safetensors.h - safetensors reader and writer ------------*- C++ -*-===//
//
// The safetensors format (huggingface/safetensors; fixtures/official/README.md
// "Files in each case folder"): an 8-byte little-endian header length N, an
// N-byte JSON object header mapping each tensor name to
// {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} plus an
// optional "__metadata__" object of string -> string, then the data region;
// offsets are relative to the start of the data region (byte 8 + N).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_SAFETENSORS_H
#define BT_RUNTIME_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {

/// Largest header the reader accepts (as the reference implementation: 100 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

/// One tensor entry of a safetensors header.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::DTYPE_UNSPECIFIED;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte range within the data region
};

/// A safetensors file opened read-only through mmap. Tensors are views into
/// the mapping (zero copy) that keep it alive.
class SafetensorsFile {
public:
  /// Opens and fully validates `path`: file shorter than 8 bytes, header
  /// length past EOF or larger than kMaxSafetensorsHeaderBytes, header not
  /// valid UTF-8 JSON or not an object, an entry that is not an object, a
  /// missing or unsupported dtype, a missing/non-integer/negative shape,
  /// data_offsets not [begin, end] with begin <= end, a range outside the data
  /// region, end - begin != numel(shape) * itemsize, overlapping tensors, a
  /// non-string __metadata__ value. Errors are InvalidArgument (NotFound etc.
  /// for I/O) and name the file and, where relevant, the tensor.
  static absl::StatusOr<SafetensorsFile> Open(const std::string &path);

  const std::string &path() const { return path_; }
  /// Tensor names, sorted.
  std::vector<std::string> names() const;
  size_t size() const { return entries_.size(); }
  bool contains(const std::string &name) const {
    return entries_.count(name) != 0;
  }
  /// The header entry of `name`, or nullptr.
  const SafetensorsEntry *Find(const std::string &name) const;
  /// The `__metadata__` map (empty if absent).
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

  /// The tensor `name`: a borrowed view into the mapping when its data is
  /// aligned for its dtype, else an owning aligned copy.
  /// Errors: NotFound "<path>: no tensor '<name>'".
  absl::StatusOr<Tensor> Get(const std::string &name) const;

private:
  std::string path_;
  std::shared_ptr<MappedFile> file_;
  uint64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

/// A named tensor to write (the writer reads `tensor` but does not own it).
using NamedTensorRef = std::pair<std::string, const Tensor *>;

/// Serializes tensors into safetensors bytes: entries sorted by name, data
/// laid out in that order without gaps, compact JSON header with
/// `__metadata__` first (when non-empty), padded with spaces to a multiple of
/// 8 bytes (as the fixtures). Errors: InvalidArgument for an empty or
/// duplicate name, the reserved name "__metadata__", an invalid tensor.
absl::StatusOr<std::string>
SerializeSafetensors(const std::vector<NamedTensorRef> &tensors,
                     const std::map<std::string, std::string> &metadata = {});

/// SerializeSafetensors + WriteFileAtomically(path) (temp file in the same
/// directory, fsync, rename). Errors name `path`.
absl::Status WriteSafetensors(
    const std::string &path, const std::vector<NamedTensorRef> &tensors,
    const std::map<std::string, std::string> &metadata = {});

/// Convenience overload for a name -> tensor map.
absl::Status WriteSafetensors(
    const std::string &path, const std::map<std::string, Tensor> &tensors,
    const std::map<std::string, std::string> &metadata = {});

} // namespace bt::rt

#endif // BT_RUNTIME_SAFETENSORS_H
