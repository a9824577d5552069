//===- file_util.h - mapped files and atomic writes -------------*- C++ -*-===//
//
// Read-only memory mappings of whole files, the one way files are opened for
// reading (OpenRegularFileForReading: regular files only, a FIFO is an error
// and never a hang) and the one way files are written (AtomicFileWriter:
// temporary file next to the real target, fsync, rename, fsync of the
// directory; devices and FIFOs in place), used by safetensors, checkpoints,
// artifacts and every command's outputs (docs/abi.md).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_FILE_UTIL_H
#define BT_RUNTIME_FILE_UTIL_H

#include <cstdint>
#include <memory>
#include <string>
#include <sys/stat.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bt::rt {

/// An owned file descriptor, closed on destruction.
class ScopedFd {
public:
  ScopedFd() = default;
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd();
  ScopedFd(ScopedFd &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  ScopedFd &operator=(ScopedFd &&other) noexcept;
  ScopedFd(const ScopedFd &) = delete;
  ScopedFd &operator=(const ScopedFd &) = delete;
  int get() const { return fd_; }

private:
  int fd_ = -1;
};

/// Opens `path` for reading if it is a regular file (after symbolic links).
/// The file is opened with O_NONBLOCK and its type checked with fstat on the
/// descriptor, so a FIFO, a device or a directory is an error and never
/// blocks. `st` (optional) receives the fstat result. Errors: NotFound /
/// PermissionDenied naming `path` and the system error; FailedPrecondition
/// "<path>: is a FIFO (named pipe), expected a regular file" (or a
/// directory, a character device, ...).
absl::StatusOr<ScopedFd> OpenRegularFileForReading(const std::string &path,
                                                   struct stat *st = nullptr);

/// A read-only, private memory mapping of a whole file. Empty files map to an
/// empty view. The mapping lives as long as the object; share it through
/// std::shared_ptr to keep views (Tensor::Borrow keepalive) valid.
class MappedFile {
public:
  /// Maps `path` read-only (opened with OpenRegularFileForReading). While
  /// the mapping lives, AtomicFileWriter refuses to replace the file (an
  /// output path that names an input). Errors: NotFound / PermissionDenied /
  /// FailedPrecondition (not a regular file) / Internal (mmap failure), each
  /// naming `path` and the system error.
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(const std::string &path);

  /// A read-only, page-aligned private copy of `bytes` in anonymous memory,
  /// named `name` (for messages; no file is involved and none is
  /// registered as an input): an artifact built in memory reads exactly as
  /// a mapped file. Errors: ResourceExhausted when the memory cannot be
  /// mapped.
  static absl::StatusOr<std::shared_ptr<MappedFile>>
  FromBytes(std::string name, absl::string_view bytes);

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
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool registered_ = false;
};

/// Reads a whole regular file (OpenRegularFileForReading). Errors name
/// `path` and the system error, or the file type.
absl::StatusOr<std::string> ReadFile(const std::string &path);

/// Writes a file atomically: the bytes go to a temporary file in the same
/// directory ("<path>.tmp.XXXXXX"), which is fsync'ed, given `mode`
/// (permission bits, e.g. 0644 or 0755 for executables) and renamed over
/// `path`; the directory is then fsync'ed. If anything fails, or the writer
/// is destroyed without Commit(), the temporary file is removed and `path` is
/// left untouched. Every file the runtime and the tools write goes through
/// this class. What `path` names decides how:
///  - a symbolic link (or a chain of them, possibly dangling): the file the
///    links finally name is replaced (created), the links stay links;
///  - a character device (/dev/null) or a FIFO: written in place, never
///    replaced (a FIFO without a reader is an error, not a hang); so is a
///    file of /proc or /sys;
///  - a directory, a block device or a socket: refused;
///  - a regular file that this process has mapped as an input (MappedFile,
///    e.g. `eval --inputs X -o X`): refused, the input is never replaced.
class AtomicFileWriter {
public:
  /// Creates the temporary file (or opens a device or FIFO). Errors:
  /// FailedPrecondition naming `path` for the refused cases above, else the
  /// system error naming `path`.
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
  /// fsync, chmod to `mode`, rename into place, fsync the directory (a
  /// device or FIFO: close; `mode` does not apply).
  absl::Status Commit(uint32_t mode = 0644);

private:
  AtomicFileWriter() = default;
  /// path_: as given; target_: after symbolic links (renamed over).
  std::string path_, target_, tmp_path_;
  bool in_place_ = false;
  int fd_ = -1;
  uint64_t offset_ = 0;
  bool committed_ = false;
};

/// The checks AtomicFileWriter::Create makes before it writes anything, for a
/// command to call before its work (so that a long run does not end in a
/// refused output): OK for a new path, a regular file, a device or a FIFO;
/// FailedPrecondition naming `path` for a directory, a block device, a
/// socket or an input of this process (a live MappedFile); InvalidArgument
/// for an empty path or one ending in '/'.
absl::Status CheckOutputPath(const std::string &path);

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
