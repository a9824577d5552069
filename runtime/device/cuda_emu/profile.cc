//===- profile.cc - global-memory traffic counted by the emulator ---------===//
//
// See emulator.h (ProfileAdd, the counters) and docs/cuda-emulator.md
// ("Traffic counters"): per kernel name, the launches, the bytes its threads
// loaded and stored in global memory (every access), and the distinct
// 32-byte sectors each launch touched (what a GPU moves from DRAM at least,
// with no reuse between launches); cuBLAS GEMMs under "cublasSgemm" with
// their operands' bytes and 2·m·n·k FLOPs. BT_CUDA_EMU_PROFILE=<file> writes
// the table as CSV when the process exits.
//
//===----------------------------------------------------------------------===//

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "emulator.h"

namespace bt::cuda_emu {
namespace {

std::mutex g_profile_mu;
std::map<std::string, KernelProfile> &Table() {
  static auto *t = new std::map<std::string, KernelProfile>();
  return *t;
}

void WriteProfile() {
  const char *path = std::getenv("BT_CUDA_EMU_PROFILE");
  if (path == nullptr || *path == 0)
    return;
  std::lock_guard<std::mutex> lock(g_profile_mu);
  const std::string tmp = std::string(path) + ".tmp";
  std::FILE *f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "bt cuda-emu: cannot write BT_CUDA_EMU_PROFILE %s\n", path);
    return;
  }
  std::fprintf(f, "kernel,launches,access_bytes_read,access_bytes_written,"
                  "sector_bytes_read,sector_bytes_written,flops\n");
  for (const auto &[name, p] : Table())
    std::fprintf(f, "%s,%llu,%llu,%llu,%llu,%llu,%llu\n", name.c_str(),
                 static_cast<unsigned long long>(p.launches),
                 static_cast<unsigned long long>(p.access_read),
                 static_cast<unsigned long long>(p.access_written),
                 static_cast<unsigned long long>(p.sector_read),
                 static_cast<unsigned long long>(p.sector_written),
                 static_cast<unsigned long long>(p.flops));
  const bool ok = std::fflush(f) == 0;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path) != 0)
    std::fprintf(stderr, "bt cuda-emu: cannot write BT_CUDA_EMU_PROFILE %s\n", path);
}

} // namespace

void ProfileAdd(const std::string &name, const KernelProfile &p) {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(WriteProfile); });
  std::lock_guard<std::mutex> lock(g_profile_mu);
  Table()[name] += p;
}

KernelProfile ProfileTotal() {
  std::lock_guard<std::mutex> lock(g_profile_mu);
  KernelProfile s;
  for (const auto &[name, p] : Table())
    s += p;
  return s;
}

} // namespace bt::cuda_emu
