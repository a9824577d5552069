//===- file_util.cc - mapped files and atomic writes ----------------------===//

#include "bt/runtime/base/file_util.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace bt::rt {

absl::Status ErrnoToStatus(int err, absl::string_view context) {
  std::string msg = absl::StrCat(context, ": ", std::strerror(err));
  switch (err) {
  case ENOENT:
  case ENOTDIR:
    return absl::NotFoundError(msg);
  case EACCES:
  case EPERM:
    return absl::PermissionDeniedError(msg);
  case EEXIST:
    return absl::AlreadyExistsError(msg);
  case ENOSPC:
  case ENOMEM:
  case EMFILE:
  case ENFILE:
    return absl::ResourceExhaustedError(msg);
  case EINVAL:
    return absl::InvalidArgumentError(msg);
  default:
    return absl::InternalError(msg);
  }
}

namespace {
// Closes an fd on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0)
      ::close(fd);
  }
};


std::string DirName(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}
} // namespace

absl::Status WriteAllToFd(int fd, absl::string_view bytes,
                          const std::string &what) {
  const char *p = bytes.data();
  size_t n = bytes.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return ErrnoToStatus(errno, absl::StrCat("cannot write ", what));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<MappedFile>>
MappedFile::Open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (!S_ISREG(st.st_mode))
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a regular file"));
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<uint64_t>(st.st_size);
  if (m->size_ > 0) {
    void *p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      return ErrnoToStatus(errno, absl::StrCat("cannot mmap ", path));
    m->data_ = p;
  }
  return m;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr)
    ::munmap(data_, size_);
}

absl::StatusOr<std::string> ReadFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": is a directory, expected a file"));
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return ErrnoToStatus(errno, absl::StrCat("cannot read ", path));
    }
    if (r == 0)
      break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<AtomicFileWriter>>
AtomicFileWriter::Create(const std::string &path) {
  if (path.empty() || path.back() == '/')
    return absl::InvalidArgumentError(
        absl::StrCat("invalid output path '", path, "'"));
  std::unique_ptr<AtomicFileWriter> w(new AtomicFileWriter());
  w->path_ = path;
  std::string tmpl = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
  if (fd < 0)
    return ErrnoToStatus(
        errno, absl::StrCat("cannot create a temporary file next to ", path));
  w->fd_ = fd;
  w->tmp_path_ = tmpl;
  return w;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!committed_ && !tmp_path_.empty())
    ::unlink(tmp_path_.c_str());
}

absl::Status AtomicFileWriter::Write(absl::string_view bytes) {
  if (fd_ < 0)
    return absl::FailedPreconditionError(
        absl::StrCat("writer for ", path_, " is closed"));
  absl::Status s = WriteAllToFd(fd_, bytes, path_);
  if (s.ok())
    offset_ += bytes.size();
  return s;
}

absl::Status AtomicFileWriter::WriteZeros(uint64_t n) {
  static const char kZeros[4096] = {};
  while (n > 0) {
    uint64_t k = n < sizeof kZeros ? n : sizeof kZeros;
    absl::Status s = Write(absl::string_view(kZeros, k));
    if (!s.ok())
      return s;
    n -= k;
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit(uint32_t mode) {
  if (fd_ < 0)
    return absl::FailedPreconditionError(
        absl::StrCat("writer for ", path_, " is closed"));
  if (::fsync(fd_) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot fsync ", tmp_path_));
  if (::fchmod(fd_, mode) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot chmod ", tmp_path_));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return ErrnoToStatus(errno, absl::StrCat("cannot close ", tmp_path_));
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot rename ", tmp_path_,
                                             " to ", path_));
  committed_ = true;
  // Make the rename durable.
  int dfd = ::open(DirName(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string &path,
                                 absl::string_view bytes, uint32_t mode) {
  auto w = AtomicFileWriter::Create(path);
  if (!w.ok())
    return w.status();
  absl::Status s = (*w)->Write(bytes);
  if (!s.ok())
    return s;
  return (*w)->Commit(mode);
}

} // namespace bt::rt
