//===- kernels.cc - kernel libraries (docs/abi.md) ------------------------===//

#include "bt/runtime/device/kernels.h"

#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bt/runtime/base/shared_object.h"

namespace bt::rt {

absl::StatusOr<std::unique_ptr<KernelLibrary>>
KernelLibrary::Load(absl::string_view so_bytes, const std::string &name) {
  if (so_bytes.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the kernel library is empty"));
  if (so_bytes.size() < 4 || std::memcmp(so_bytes.data(), "\x7f" "ELF", 4) != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the kernel library is not an ELF shared object"));

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

} // namespace bt::rt
