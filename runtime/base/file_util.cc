//===- file_util.cc - mapped files and atomic writes ----------------------===//

#include "bt/runtime/base/file_util.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bt/runtime/base/status_macros.h"

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

namespace {

/// The (st_dev, st_ino) of every live MappedFile: the inputs this process
/// reads from, which AtomicFileWriter refuses to replace (`--inputs X -o X`).
class OpenInputs {
public:
  static OpenInputs &Get() {
    static OpenInputs *inputs = new OpenInputs();
    return *inputs;
  }
  void Add(dev_t dev, ino_t ino, const std::string &path) {
    std::lock_guard<std::mutex> lock(mu_);
    files_.insert({{dev, ino}, path});
  }
  void Remove(dev_t dev, ino_t ino, const std::string &path) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.find({{dev, ino}, path});
    if (it != files_.end())
      files_.erase(it);
  }
  /// The path an input with this identity was opened as, or "".
  std::string Find(dev_t dev, ino_t ino) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = files_.lower_bound({{dev, ino}, std::string()});
    return it != files_.end() && it->first == std::make_pair(dev, ino)
               ? it->second
               : std::string();
  }

private:
  std::mutex mu_;
  std::multiset<std::pair<std::pair<dev_t, ino_t>, std::string>> files_;
};

const char *FileTypeName(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "not a regular file";
}

} // namespace

absl::StatusOr<ScopedFd> OpenRegularFileForReading(const std::string &path,
                                                   struct stat *st_out) {
  // O_NONBLOCK: opening a FIFO without a writer would block forever; the
  // type is checked on the descriptor (no race between stat and open).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  ScopedFd owned(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (!S_ISREG(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": is ", FileTypeName(st.st_mode), ", expected a regular file"));
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (st_out != nullptr)
    *st_out = st;
  return owned;
}

ScopedFd::~ScopedFd() {
  if (fd_ >= 0)
    ::close(fd_);
}

ScopedFd &ScopedFd::operator=(ScopedFd &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

absl::StatusOr<std::shared_ptr<MappedFile>>
MappedFile::Open(const std::string &path) {
  struct stat st;
  BT_ASSIGN_OR_RETURN(ScopedFd fd, OpenRegularFileForReading(path, &st));
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  m->size_ = static_cast<uint64_t>(st.st_size);
  if (m->size_ > 0) {
    void *p = ::mmap(nullptr, m->size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED)
      return ErrnoToStatus(errno, absl::StrCat("cannot mmap ", path));
    m->data_ = p;
  }
  m->dev_ = st.st_dev;
  m->ino_ = st.st_ino;
  OpenInputs::Get().Add(m->dev_, m->ino_, path);
  m->registered_ = true;
  return m;
}

absl::StatusOr<std::shared_ptr<MappedFile>>
MappedFile::FromBytes(std::string name, absl::string_view bytes) {
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = std::move(name);
  m->size_ = bytes.size();
  if (m->size_ > 0) {
    void *p = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      return absl::ResourceExhaustedError(absl::StrCat(
          m->path_, ": cannot map ", m->size_, " bytes: ", strerror(errno)));
    std::memcpy(p, bytes.data(), bytes.size());
    ::mprotect(p, m->size_, PROT_READ);
    m->data_ = p;
  }
  return m;
}

MappedFile::~MappedFile() {
  if (registered_)
    OpenInputs::Get().Remove(dev_, ino_, path_);
  if (data_ != nullptr)
    ::munmap(data_, size_);
}

absl::StatusOr<std::string> ReadFile(const std::string &path) {
  BT_ASSIGN_OR_RETURN(ScopedFd fd, OpenRegularFileForReading(path));
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t r = ::read(fd.get(), buf, sizeof buf);
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

namespace {

/// Follows the symbolic links of `path` (up to 40, as the kernel does) to
/// the path they finally name, which need not exist (a dangling link names
/// the file to create). Relative link targets are taken relative to the
/// link's directory.
absl::StatusOr<std::string> FollowSymlinks(const std::string &path) {
  std::string cur = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(cur.c_str(), &st) != 0) {
      if (errno == ENOENT)
        return cur;
      return ErrnoToStatus(errno, absl::StrCat("cannot stat ", cur));
    }
    if (!S_ISLNK(st.st_mode))
      return cur;
    char buf[PATH_MAX];
    ssize_t n = ::readlink(cur.c_str(), buf, sizeof buf - 1);
    if (n < 0)
      return ErrnoToStatus(errno, absl::StrCat("cannot read the link ", cur));
    std::string target(buf, static_cast<size_t>(n));
    cur = !target.empty() && target[0] == '/'
              ? target
              : absl::StrCat(DirName(cur), "/", target);
  }
  return ErrnoToStatus(ELOOP, absl::StrCat("cannot resolve ", path));
}

/// Pseudo file systems whose files are control interfaces, written in place
/// (a temporary file cannot be created or renamed there).
bool IsPseudoFileSystem(const std::string &path) {
  struct statfs fs;
  if (::statfs(path.c_str(), &fs) != 0)
    return false;
  constexpr long kProcSuperMagic = 0x9fa0, kSysfsMagic = 0x62656572;
  return fs.f_type == kProcSuperMagic || fs.f_type == kSysfsMagic;
}

} // namespace

absl::Status CheckOutputPath(const std::string &path) {
  if (path.empty() || path.back() == '/')
    return absl::InvalidArgumentError(
        absl::StrCat("invalid output path '", path, "'"));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return errno == ENOENT ? absl::OkStatus()
                           : ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (S_ISDIR(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot write ", path, ": it is a directory (expected a file path)"));
  if (S_ISBLK(st.st_mode) || S_ISSOCK(st.st_mode))
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to write ", path, ": it is ", FileTypeName(st.st_mode)));
  if (S_ISREG(st.st_mode)) {
    std::string input = OpenInputs::Get().Find(st.st_dev, st.st_ino);
    if (!input.empty())
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to write ", path, ": it is ",
          input == path ? "an input" : absl::StrCat("the input ", input),
          " of this command (write the output to another path)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AtomicFileWriter>>
AtomicFileWriter::Create(const std::string &path) {
  BT_RETURN_IF_ERROR(CheckOutputPath(path));
  std::unique_ptr<AtomicFileWriter> w(new AtomicFileWriter());
  w->path_ = path;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    // An existing target (through any symbolic links, including /proc's
    // magic links such as /dev/stdout).
    if (!S_ISREG(st.st_mode) || IsPseudoFileSystem(path)) {
      // A character device (/dev/null), a FIFO (`-o >(gzip > x)`) or a
      // /proc or /sys file: written in place, never replaced. O_NONBLOCK
      // makes a FIFO without a reader an error instead of a hang.
      int fd = ::open(path.c_str(),
                      O_WRONLY | O_CLOEXEC | O_NOCTTY |
                          (S_ISFIFO(st.st_mode) ? O_NONBLOCK : 0));
      if (fd < 0)
        return ErrnoToStatus(errno == ENXIO ? EPIPE : errno,
                             absl::StrCat("cannot open ", path,
                                          S_ISFIFO(st.st_mode)
                                              ? " (a FIFO: is a reader open?)"
                                              : ""));
      int flags = ::fcntl(fd, F_GETFL);
      if (flags >= 0)
        ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
      w->fd_ = fd;
      w->in_place_ = true;
      return w;
    }
  }
  // A regular file or a new one: replaced atomically at the path its
  // symbolic links finally name, so that a link stays a link.
  BT_ASSIGN_OR_RETURN(w->target_, FollowSymlinks(path));
  std::string tmpl = w->target_ + ".tmp.XXXXXX";
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
  if (in_place_) {
    // Devices and FIFOs have nothing to sync (fsync fails with EINVAL).
    if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
      int err = errno;
      ::close(fd_);
      fd_ = -1;
      return ErrnoToStatus(err, absl::StrCat("cannot fsync ", path_));
    }
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0)
      return ErrnoToStatus(errno, absl::StrCat("cannot close ", path_));
    committed_ = true;
    return absl::OkStatus();
  }
  if (::fsync(fd_) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot fsync ", tmp_path_));
  if (::fchmod(fd_, mode) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot chmod ", tmp_path_));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return ErrnoToStatus(errno, absl::StrCat("cannot close ", tmp_path_));
  }
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), target_.c_str()) != 0)
    return ErrnoToStatus(errno, absl::StrCat("cannot rename ", tmp_path_,
                                             " to ", target_));
  committed_ = true;
  // Make the rename durable.
  int dfd = ::open(DirName(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
