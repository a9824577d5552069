//===- kernels.cc - CPU kernel libraries (docs/abi.md) --------------------===//

#include "bt/runtime/device/kernels.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <map>
#include <vector>
#include <sys/mman.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bt/runtime/base/file_util.h"
#include "bt/runtime/base/status_macros.h"
#include "cblas.h"
#include "bt/runtime/device/entry_call.h"
#include "bt/runtime/base/shared_object.h"

namespace bt::rt {
namespace {

// Kernel libraries leave their BLAS calls undefined and expect the loading
// process to provide them (docs/abi.md). Referencing OpenBLAS here keeps it a
// DT_NEEDED dependency of every binary that links btrt, even with
// --as-needed, so its symbols are in the global scope.
auto *volatile kKeepBlasLinked = &cblas_sgemm;


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
  int fd = no_memfd != nullptr && *no_memfd != '\0' && *no_memfd != '0'
               ? -1
               : ::memfd_create("bt-kernels", MFD_CLOEXEC);
  std::string tmp_path;
  if (fd >= 0) {
    lib.method = "memfd";
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

absl::StatusOr<std::unique_ptr<KernelLibrary>>
KernelLibrary::Load(absl::string_view so_bytes, const std::string &name) {
  if (so_bytes.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the kernel library is empty"));
  if (so_bytes.size() < 4 || std::memcmp(so_bytes.data(), "\x7f" "ELF", 4) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the kernel library is not an ELF shared object"));

  if (kKeepBlasLinked == nullptr)
    return absl::InternalError("OpenBLAS is not linked");
  absl::StatusOr<LoadedSharedObject> loaded = LoadSharedObjectFromMemory(
      so_bytes, absl::StrCat(name, " kernels"), RTLD_NOW | RTLD_LOCAL);
  if (!loaded.ok()) {
    absl::string_view msg = loaded.status().message();
    const std::string prefix = absl::StrCat(name, " kernels: cannot load: ");
    if (absl::StartsWith(msg, prefix))
      return absl::Status(loaded.status().code(),
                          absl::StrCat(name, ": cannot load the kernel library: ",
                                       msg.substr(prefix.size())));
    return loaded.status();
  }
  std::unique_ptr<KernelLibrary> lib(new KernelLibrary());
  lib->name_ = name;
  lib->handle_ = loaded->handle;
  lib->fd_ = loaded->fd;
  lib->load_method_ = loaded->method;
  lib->load_path_ = loaded->path;

  dlerror();
  void *v = ::dlsym(lib->handle_, "bt_kernel_abi_version");
  if (v == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the kernel library does not export "
                           "bt_kernel_abi_version (not a bt kernel library?)"));
  const int32_t version = reinterpret_cast<int32_t (*)()>(v)();
  if (version != kKernelAbiVersion)
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": kernel ABI version ", version,
                     ", this runtime implements version ", kKernelAbiVersion));
  return lib;
}

KernelLibrary::~KernelLibrary() {
  if (handle_ != nullptr)
    ::dlclose(handle_);
  if (fd_ >= 0)
    ::close(fd_);
}

absl::StatusOr<KernelEntryFn>
KernelLibrary::Resolve(const std::string &symbol) const {
  dlerror();
  void *p = ::dlsym(handle_, symbol.c_str());
  if (p == nullptr)
    return absl::NotFoundError(absl::StrCat(
        name_, ": the kernel library does not export '", symbol, "'"));
  return reinterpret_cast<KernelEntryFn>(p);
}

absl::StatusOr<std::vector<Tensor>>
KernelLibrary::Call(const proto::EntryPoint &ep,
                    absl::Span<const Tensor *const> params,
                    absl::Span<const Tensor *const> inputs) const {
  BT_ASSIGN_OR_RETURN(KernelEntryFn fn, Resolve(ep.symbol()));
  return CallEntryPoint(fn, ep, params, inputs);
}

namespace {

// Dense row-major descriptor words for `t`.
std::vector<int64_t> DescriptorFor(const Tensor &t) {
  return entry_call::DenseDescriptor(
      static_cast<int64_t>(
          reinterpret_cast<intptr_t>(const_cast<void *>(t.data()))),
      t.shape());
}

} // namespace

absl::StatusOr<std::vector<Tensor>>
CallEntryPoint(KernelEntryFn fn, const proto::EntryPoint &ep,
               absl::Span<const Tensor *const> params,
               absl::Span<const Tensor *const> inputs) {
  const std::string what = absl::StrCat("entry point '", ep.name(), "'");
  BT_RETURN_IF_ERROR(
      entry_call::CheckArity(what, fn, ep, params.size(), inputs.size()));

  std::vector<std::vector<int64_t>> args;
  args.reserve(params.size() + inputs.size());
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i] == nullptr || !params[i]->valid())
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": param '", ep.params(i), "' is missing"));
    args.push_back(DescriptorFor(*params[i]));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    BT_RETURN_IF_ERROR(entry_call::CheckInput(what, ep.inputs(i), inputs[i]));
    args.push_back(DescriptorFor(*inputs[i]));
  }

  const std::vector<int64_t> result = entry_call::Invoke(fn, ep, args);
  const std::vector<const int64_t *> words =
      entry_call::OutputDescriptors(ep, result);

  // Take ownership of every returned buffer first, so that any error below
  // still frees them (once, even if outputs share a buffer).
  std::map<void *, std::shared_ptr<void>> owners;
  for (const int64_t *w : words) {
    void *allocated = reinterpret_cast<void *>(static_cast<intptr_t>(w[0]));
    if (allocated != nullptr && !owners.count(allocated))
      owners[allocated] =
          std::shared_ptr<void>(allocated, [](void *p) { std::free(p); });
  }

  std::vector<Tensor> outputs;
  for (int i = 0; i < ep.outputs_size(); ++i) {
    const proto::TensorSpec &o = ep.outputs(i);
    BT_ASSIGN_OR_RETURN(entry_call::OutputView v,
                        entry_call::ReadOutput(what, o, words[i]));
    void *allocated =
        reinterpret_cast<void *>(static_cast<intptr_t>(v.allocated));
    char *aligned = reinterpret_cast<char *>(static_cast<intptr_t>(v.aligned));
    char *data = aligned == nullptr
                     ? nullptr
                     : aligned + v.offset * static_cast<int64_t>(v.itemsize);
    if (v.numel == 0 || v.dense) {
      std::shared_ptr<void> owner =
          allocated ? owners[allocated] : std::shared_ptr<void>();
      if (owner == nullptr) {
        // Empty output without a buffer: give it an empty owning tensor.
        BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(o.dtype(), v.sizes));
        outputs.push_back(std::move(t));
      } else {
        outputs.push_back(
            Tensor::FromShared(o.dtype(), v.sizes, std::move(owner), data));
      }
    } else {
      BT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(o.dtype(), v.sizes));
      entry_call::GatherStrided(data, static_cast<char *>(t.data()), v.itemsize,
                                v.sizes, v.strides);
      outputs.push_back(std::move(t));
    }
  }
  return outputs;
}

} // namespace bt::rt
