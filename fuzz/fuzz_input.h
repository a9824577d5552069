//===- fuzz_input.h - fuzz input as a file path ----------------*- C++ -*-===//
//
// The runtime's loaders take paths (they mmap the file after checking it is a
// regular file), so each fuzz input is written to one anonymous in-memory
// file (memfd_create) and handed over as /proc/self/fd/N: no disk I/O, and
// the loader runs exactly as on a user's file.
//
//===----------------------------------------------------------------------===//

#ifndef BT_FUZZ_FUZZ_INPUT_H
#define BT_FUZZ_FUZZ_INPUT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace bt::fuzz {

/// Replaces the in-memory file's contents by [data, data + size) and returns
/// its path. Aborts on I/O failure (a harness bug, not a finding).
inline const std::string &AsFile(const uint8_t *data, size_t size) {
  static const int fd = ::memfd_create("bt-fuzz", 0);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 ||
      (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size))) {
    std::perror("bt-fuzz: memfd");
    std::abort();
  }
  return path;
}

} // namespace bt::fuzz

#endif // BT_FUZZ_FUZZ_INPUT_H
