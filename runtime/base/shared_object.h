//===- shared_object.h - loading shared objects from memory -----*- C++ -*-===//
//
// Internal to btrt: the memfd + dlopen loader behind KernelLibrary::Load
// (docs/abi.md), also used for the embedded SentencePiece shim
// (tokenizer.cc).
//
//===----------------------------------------------------------------------===//

#ifndef BT_RUNTIME_SRC_SHARED_OBJECT_H
#define BT_RUNTIME_SRC_SHARED_OBJECT_H

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace bt::rt {

struct LoadedSharedObject {
  void *handle = nullptr;
  int fd = -1;        // the memfd, to close after dlclose (-1: none)
  std::string method; // "memfd" or "tmpfile"
  std::string path;   // the path given to dlopen
};

/// Writes `so_bytes` to a memfd (or, without memfd_create or with
/// BT_KERNELS_NO_MEMFD set, an unlinked temporary file) and dlopens it with
/// `dlopen_flags`. The fd must stay open while the object is loaded (see
/// KernelLibrary::Load). Errors: InvalidArgument naming `name` (not ELF,
/// dlopen failure with dlerror()), I/O errors.
absl::StatusOr<LoadedSharedObject>
LoadSharedObjectFromMemory(absl::string_view so_bytes, const std::string &name,
                           int dlopen_flags);

} // namespace bt::rt

#endif // BT_RUNTIME_SRC_SHARED_OBJECT_H
