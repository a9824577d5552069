//===- shared_object.cc - loading shared objects from memory --------------===//

#include "bt/runtime/base/shared_object.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "bt/runtime/base/file_util.h"

namespace bt::rt {
namespace {

std::string DlError() {
  const char *e = dlerror();
  return e ? e : "unknown dlopen error";
}

} // namespace

absl::StatusOr<LoadedSharedObject>
LoadSharedObjectFromMemory(absl::string_view so_bytes, const std::string &name,
                           int dlopen_flags) {
  if (so_bytes.size() < 4 || std::memcmp(so_bytes.data(), "\x7f" "ELF", 4) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not an ELF shared object"));
  LoadedSharedObject lib;
  const char *no_memfd = std::getenv("BT_KERNELS_NO_MEMFD");
  // BT_KERNELS_KEEP_DIR=DIR: load from a new file DIR/bt-kernels-XXXXXX.so
  // that stays after the process, so that profilers (perf report) resolve the
  // kernels' symbols. Never overwrites a file (mkostemps picks a new name).
  const char *keep_dir = std::getenv("BT_KERNELS_KEEP_DIR");
  const bool keep = keep_dir != nullptr && *keep_dir != '\0';
  int fd = keep || (no_memfd != nullptr && *no_memfd != '\0' && *no_memfd != '0')
               ? -1
               : ::memfd_create("bt-kernels", MFD_CLOEXEC);
  std::string tmp_path;
  if (fd >= 0) {
    lib.method = "memfd";
  } else if (keep) {
    tmp_path = absl::StrCat(keep_dir, "/bt-kernels-XXXXXX.so");
    fd = ::mkostemps(tmp_path.data(), 3, O_CLOEXEC);
    if (fd < 0)
      return ErrnoToStatus(errno, absl::StrCat(name, ": BT_KERNELS_KEEP_DIR: "
                                                     "cannot create ",
                                               tmp_path));
    ::fchmod(fd, 0644);
    lib.method = "kept file";
  } else {
    // Fallback: an unlinked temporary file.
    const char *dir = std::getenv("TMPDIR");
    tmp_path = absl::StrCat(dir && *dir ? dir : "/tmp", "/bt-kernels-XXXXXX");
    fd = ::mkostemp(tmp_path.data(), O_CLOEXEC);
    if (fd < 0)
      return ErrnoToStatus(errno,
                           absl::StrCat(name, ": memfd_create is unavailable "
                                              "and cannot create ",
                                        tmp_path));
    lib.method = "tmpfile";
  }
  absl::Status s = WriteAllToFd(fd, so_bytes, name);
  // glibc's dlopen returns an already loaded object whose name equals the
  // path, so "/proc/self/fd/N" must not name a library still loaded (N is
  // reused once an fd is closed). Keep our fd open while the library is
  // loaded, and move to another fd number if N's path is taken (by a
  // library that was never unloaded).
  std::vector<int> spare_fds;
  std::string path = tmp_path;
  if (s.ok()) {
    for (int tries = 0;; ++tries) {
      if (tmp_path.empty())
        path = absl::StrCat("/proc/self/fd/", fd);
      void *existing = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
      if (existing == nullptr)
        break;
      ::dlclose(existing);
      if (!tmp_path.empty() || tries >= 64) {
        s = absl::InternalError(absl::StrCat(
            name, ": cannot find an unused path to load the library from"));
        break;
      }
      spare_fds.push_back(fd);
      fd = ::fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
      if (fd < 0) {
        s = ErrnoToStatus(errno, absl::StrCat(name, ": cannot dup the library fd"));
        fd = spare_fds.back();
        spare_fds.pop_back();
        break;
      }
    }
  }
  if (s.ok()) {
    lib.path = path;
    lib.handle = ::dlopen(path.c_str(), dlopen_flags);
    if (lib.handle == nullptr)
      s = absl::InvalidArgumentError(
          absl::StrCat(name, ": cannot load: ", DlError()));
  }
  for (int f : spare_fds)
    ::close(f);
  if (!tmp_path.empty()) {
    ::close(fd);
    if (!keep || !s.ok())
      ::unlink(tmp_path.c_str());
  } else if (lib.handle != nullptr) {
    lib.fd = fd; // closed after dlclose
  } else {
    ::close(fd);
  }
  if (!s.ok())
    return s;
  return lib;
}

} // namespace bt::rt
