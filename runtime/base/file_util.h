//===- file_util.h - mapped files and atomic writes -------------*- C++ -*-===//
//
// Read-only memory mappings of whole files and atomic file replacement
// (temporary file in the destination directory, fsync, rename, fsync of the
// directory), used by safetensors, checkpoints and artifacts (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_FILE_UTIL_H
#define BT_RUNTIME_FILE_UTIL_H

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bt::rt {

/// A read-only, private memory mapping of a whole file. Empty files map to an
/// empty view. The mapping lives as long as the object; share it through
/// std::shared_ptr to keep views (Tensor::Borrow keepalive) valid.
class MappedFile {
public:
  /// Maps `path` read-only. Errors: NotFound / PermissionDenied /
  /// FailedPrecondition (not a regular file) / Internal (mmap failure), each
  /// naming `path` and the system error.
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string &path);

  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const std::string &path() const { return path_; }
  const char *data() const { return static_cast<const char *>(data_); }
  uint64_t size() const { return size_; }
  absl::string_view view() const { return absl::string_view(data(), size_); }

private:
  MappedFile() = default;
  std::string path_;
  void *data_ = nullptr;
  uint64_t size_ = 0;
};

/// Reads a whole file. Errors name `path` and the system error.
absl::StatusOr<std::string> ReadFile(const std::string &path);

/// Writes a file atomically: the bytes go to a temporary file in the same
/// directory ("<path>.tmp.XXXXXX"), which is fsync'ed, given `mode`
/// (permission bits, e.g. 0644 or 0755 for executables) and renamed over
/// `path`; the directory is then fsync'ed. If anything fails, or the writer
/// is destroyed without Commit(), the temporary file is removed and `path` is
/// left untouched.
class AtomicFileWriter {
public:
  /// Creates the temporary file. Errors name `path` and the system error.
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>>
  Create(const std::string &path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;

  /// Appends bytes. Errors (e.g. ENOSPC) name the destination path.
  absl::Status Write(absl::string_view bytes);
  /// Appends `n` zero bytes (padding).
  absl::Status WriteZeros(uint64_t n);
  /// Bytes written so far.
  uint64_t offset() const { return offset_; }
  /// fsync, chmod to `mode`, rename into place, fsync the directory.
  absl::Status Commit(uint32_t mode = 0644);

private:
  AtomicFileWriter() = default;
  std::string path_, tmp_path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  bool committed_ = false;
};

/// Convenience: AtomicFileWriter with one buffer.
absl::Status WriteFileAtomically(const std::string &path,
                                 absl::string_view bytes, uint32_t mode = 0644);

/// A system error as a Status: "<context>: <strerror(err)>", with the code
/// mapped from errno (ENOENT -> NotFound, EACCES -> PermissionDenied, ...).
absl::Status ErrnoToStatus(int err, absl::string_view context);

/// Writes all of `bytes` to `fd`, retrying on EINTR and short writes.
/// Errors: the errno of write(2) as a status "cannot write <what>: ...".
absl::Status WriteAllToFd(int fd, absl::string_view bytes,
                          const std::string &what);

} // namespace bt::rt

#endif // BT_RUNTIME_FILE_UTIL_H
