//===- kernels.h - kernel libraries (docs/abi.md) ---------------*- C++ -*-===//
//
// Loading the kernels section of an artifact (an ELF shared object: the
// kernels of a cpu artifact, the host code of a cuda one) from memory; its
// entry points follow the ABI of docs/abi.md, and each device calls them on
// its own buffers (device/cpu, device/cuda; argv: device/entry_call.h):
//
//   int32_t bt_kernel_abi_version(void);   // == 1
//   void bt_entry_<name>(void **argv);
//
// argv[0] -> result block (output memref descriptors, consecutive) when the
// entry has outputs; then one pointer per argument descriptor: params in
// EntryPoint.params order, then inputs in EntryPoint.inputs order. A rank-r
// descriptor is MLIR's StridedMemRefType<T, r>: 2 pointers + (1 + 2r) int64
// words (allocated, aligned, offset, sizes[r], strides[r]; elements).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_DEVICE_KERNELS_H
#define BT_RUNTIME_DEVICE_KERNELS_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "bt/proto/bt.pb.h"
#include "bt/runtime/base/tensor.h"

namespace bt::rt {

/// The kernel ABI version this runtime implements (docs/abi.md).
inline constexpr int32_t kKernelAbiVersion = 1;

/// `void bt_entry_<name>(void **argv)`.
using KernelEntryFn = void (*)(void **);

/// Number of 8-byte words of a rank-`rank` memref descriptor: 3 + 2 * rank.
inline constexpr int64_t MemRefDescriptorWords(int64_t rank) {
  return 3 + 2 * rank;
}

/// A shared object loaded from bytes.
class KernelLibrary {
public:
  /// Loads `so_bytes` (an ELF shared object) with memfd_create +
  /// dlopen("/proc/self/fd/N", RTLD_NOW | RTLD_LOCAL) — nothing is written to
  /// disk; the memfd stays open while the library is loaded, because glibc
  /// would hand out an already loaded library of the same path name for a
  /// reused fd number; if memfd_create is unavailable (ENOSYS/EPERM, e.g. seccomp), a
  /// temporary file in $TMPDIR (or /tmp) that is unlinked right after
  /// dlopen (also used when the environment variable BT_KERNELS_NO_MEMFD is
  /// set to a non-empty value other than "0"). Undefined symbols (BLAS, libm, libc) resolve against the
  /// process's global scope; the runtime links OpenBLAS for that.
  /// Checks that the library exports bt_kernel_abi_version() and that it
  /// returns kKernelAbiVersion. `name` (e.g. the artifact path) is used in
  /// messages. Errors: InvalidArgument (empty/not ELF/dlopen failure with
  /// dlerror()), FailedPrecondition (ABI version mismatch).
  static absl::StatusOr<std::unique_ptr<KernelLibrary>>
  Load(absl::string_view so_bytes, const std::string &name = "kernels");

  ~KernelLibrary();
  KernelLibrary(const KernelLibrary &) = delete;
  KernelLibrary &operator=(const KernelLibrary &) = delete;

  /// Resolves `symbol` (e.g. "bt_entry_eval"). Errors: NotFound naming the
  /// symbol and the library.
  absl::StatusOr<KernelEntryFn> Resolve(const std::string &symbol) const;

  /// How the library was loaded: "memfd" or "tmpfile".
  const std::string &load_method() const { return load_method_; }
  /// The path given to dlopen ("/proc/self/fd/N" or the removed temp file).
  const std::string &load_path() const { return load_path_; }

private:
  KernelLibrary() = default;
  void *handle_ = nullptr;
  int fd_ = -1; // the memfd, kept open while loaded (see Load)
  std::string name_, load_method_, load_path_;
};

} // namespace bt::rt

#endif // BT_RUNTIME_DEVICE_KERNELS_H
