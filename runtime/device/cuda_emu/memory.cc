//===- memory.cc - emulated device memory, reports, the fault handler -----===//
//
// See emulator.h (DeviceMemory) and docs/cuda-emulator.md.
//
//===----------------------------------------------------------------------===//

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_emu.h"
#include "emulator.h"

namespace bt::cuda_emu {
namespace {

constexpr uint64_t kPage = 4096;
// Address space of the emulated device (virtual; pages are used as written).
constexpr uint64_t kCapacity = uint64_t{256} << 30;
constexpr uint32_t kNaN = 0x7fc00000u;

std::atomic<long> g_reports{0};

uint64_t RoundUp(uint64_t x, uint64_t to) { return (x + to - 1) / to * to; }

[[noreturn]] void Fatal(const char *what) {
  std::fprintf(stderr, "bt cuda-emu: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

void *MapOrDie(void *addr, uint64_t bytes, int prot, int flags, int fd,
               const char *what) {
  void *p = ::mmap(addr, bytes, prot, flags, fd, 0);
  if (p == MAP_FAILED)
    Fatal(what);
  return p;
}

Settings &MutableSettings() {
  static Settings settings = [] {
    Settings s;
    if (const char *v = std::getenv("BT_CUDA_EMU_SEED"))
      s.seed = std::strtoull(v, nullptr, 10);
    if (const char *v = std::getenv("BT_CUDA_EMU_MAX_REPORTS"))
      s.max_reports = std::strtol(v, nullptr, 10);
    if (const char *v = std::getenv("BT_CUDA_EMU_MEMORY"))
      s.memory_limit = std::strtoull(v, nullptr, 10);
    if (const char *v = std::getenv("BT_CUDA_EMU_TRACE"))
      s.trace = std::strcmp(v, "0") != 0 && *v != 0;
    return s;
  }();
  return settings;
}

} // namespace

const Settings &GetSettings() { return MutableSettings(); }

void SetScheduleSeed(unsigned long long seed) {
  MutableSettings().seed = seed;
}

long ReportCount() { return g_reports.load(); }

void Report(const std::string &what, const std::vector<std::string> &details) {
  const long n = ++g_reports;
  const long max = GetSettings().max_reports;
  if (n > max) {
    if (n == max + 1)
      std::fprintf(stderr,
                   "bt cuda-emu: more reports follow; only the first %ld are "
                   "printed (BT_CUDA_EMU_MAX_REPORTS)\n",
                   max);
    return;
  }
  std::string text = "bt cuda-emu: ERROR: " + what + "\n";
  for (const std::string &d : details)
    text += "    " + d + "\n";
  std::fputs(text.c_str(), stderr);
}

//===----------------------------------------------------------------------===//
// DeviceMemory
//===----------------------------------------------------------------------===//

DeviceMemory &DeviceMemory::Get() {
  static DeviceMemory *memory = new DeviceMemory(); // never destroyed
  return *memory;
}

DeviceMemory::DeviceMemory() {
  capacity_ = kCapacity;
  fd_ = ::memfd_create("bt-cuda-emu-device-memory", MFD_CLOEXEC);
  if (fd_ < 0)
    Fatal("memfd_create (device memory)");
  if (::ftruncate(fd_, static_cast<off_t>(capacity_)) != 0)
    Fatal("ftruncate (device memory)");
  view_ = static_cast<char *>(MapOrDie(nullptr, capacity_, PROT_NONE,
                                       MAP_SHARED | MAP_NORESERVE, fd_,
                                       "mmap (device memory)"));
  alias_ = static_cast<char *>(MapOrDie(nullptr, capacity_, PROT_NONE,
                                        MAP_SHARED | MAP_NORESERVE, fd_,
                                        "mmap (device memory alias)"));
  init_ = static_cast<uint8_t *>(
      MapOrDie(nullptr, capacity_, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
               "mmap (initialization shadow)"));
  writes_ = static_cast<uint64_t *>(
      MapOrDie(nullptr, capacity_ * 2, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
               "mmap (write shadow)"));
  base_ = reinterpret_cast<uint64_t>(view_);
  next_ = kPage; // device address base_ is never handed out
}

uint64_t DeviceMemory::Allocate(uint64_t bytes) {
  const uint64_t span = RoundUp(bytes, kPage);
  if (bytes == 0 || next_ + span + kPage > capacity_)
    return 0;
  const uint64_t limit = GetSettings().memory_limit;
  if (limit != 0 && live_bytes_ + bytes > limit)
    return 0;
  live_bytes_ += bytes;
  const uint64_t offset = next_;
  next_ += span + kPage; // the page after the data stays a guard
  char *data = alias_ + offset;
  if (::mprotect(data, span, PROT_READ | PROT_WRITE) != 0)
    Fatal("mprotect (allocation)");
  uint32_t *words = reinterpret_cast<uint32_t *>(data);
  for (uint64_t i = 0; i < span / 4; ++i)
    words[i] = kNaN;
  Allocation a;
  a.base = base_ + offset;
  a.bytes = bytes;
  a.id = next_id_++;
  allocations_[a.base] = a;
  return a.base;
}

bool DeviceMemory::Free(uint64_t address) {
  auto it = allocations_.find(address);
  if (it == allocations_.end() || !it->second.live)
    return false;
  it->second.live = false;
  live_bytes_ -= it->second.bytes;
  const uint64_t offset = address - base_;
  const uint64_t span = RoundUp(it->second.bytes, kPage);
  // The pages go back to the system; the addresses stay unused (a later
  // access is a use after free, not a hit on another allocation).
  (void)::mprotect(alias_ + offset, span, PROT_NONE);
  (void)::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(offset), static_cast<off_t>(span));
  (void)::madvise(init_ + offset, span, MADV_DONTNEED);
  (void)::madvise(reinterpret_cast<char *>(writes_) + 2 * offset, 2 * span,
                  MADV_DONTNEED);
  return true;
}

const Allocation *DeviceMemory::Find(uint64_t address, bool *inside) const {
  *inside = false;
  auto it = allocations_.upper_bound(address);
  if (it == allocations_.begin())
    return nullptr;
  --it;
  const Allocation &a = it->second;
  *inside = address - a.base < a.bytes;
  return &a;
}

bool DeviceMemory::InLive(uint64_t address, uint64_t bytes) const {
  bool inside = false;
  const Allocation *a = Find(address, &inside);
  return a != nullptr && inside && a->live && bytes <= a->bytes &&
         address - a->base <= a->bytes - bytes;
}

std::string DeviceMemory::Describe(uint64_t address, uint64_t bytes) const {
  char buf[256];
  bool inside = false;
  const Allocation *a = Find(address, &inside);
  if (a == nullptr) {
    std::snprintf(buf, sizeof buf, "0x%llx is below every device allocation",
                  static_cast<unsigned long long>(address));
    return buf;
  }
  const long long off = static_cast<long long>(address - a->base);
  const char *state = a->live ? "" : " (freed)";
  if (inside && off + bytes <= a->bytes)
    std::snprintf(buf, sizeof buf,
                  "allocation #%llu%s [0x%llx, +%llu bytes), offset %lld",
                  static_cast<unsigned long long>(a->id), state,
                  static_cast<unsigned long long>(a->base),
                  static_cast<unsigned long long>(a->bytes), off);
  else
    std::snprintf(buf, sizeof buf,
                  "%lld bytes past the end of allocation #%llu%s [0x%llx, "
                  "+%llu bytes)",
                  off + static_cast<long long>(bytes) -
                      static_cast<long long>(a->bytes),
                  static_cast<unsigned long long>(a->id), state,
                  static_cast<unsigned long long>(a->base),
                  static_cast<unsigned long long>(a->bytes));
  return buf;
}

void DeviceMemory::SetInitialized(uint64_t address, uint64_t bytes) {
  std::memset(InitShadow(address), 1, bytes);
}

uint64_t DeviceMemory::FirstUninitialized(uint64_t address,
                                          uint64_t bytes) const {
  const uint8_t *s = InitShadow(address);
  for (uint64_t i = 0; i < bytes; ++i)
    if (s[i] == 0)
      return address + i;
  return UINT64_MAX;
}

//===----------------------------------------------------------------------===//
// Faults: host dereferences of device pointers, emulated stack overflows
//===----------------------------------------------------------------------===//

namespace {

struct sigaction g_previous;
std::mutex g_guards_mu;
std::vector<std::pair<uintptr_t, uintptr_t>> g_stack_guards;

void OnFault(int sig, siginfo_t *info, void *uc) {
  const uint64_t address = reinterpret_cast<uint64_t>(info->si_addr);
  DeviceMemory &m = DeviceMemory::Get();
  if (m.IsDevice(address)) {
    Report("host code dereferenced a device pointer",
           {"address " + [&] {
              char b[32];
              std::snprintf(b, sizeof b, "0x%llx",
                            static_cast<unsigned long long>(address));
              return std::string(b);
            }() + ": " + m.Describe(address, 1),
            "device memory is only accessible to kernels, cuMemcpy* and "
            "cuBLAS (a GPU faults or reads garbage here)"});
    std::_Exit(1);
  }
  for (auto [lo, hi] : g_stack_guards)
    if (address >= lo && address < hi) {
      Report("stack overflow of an emulated GPU thread",
             {"the emulator gives each thread a 64 KiB stack"});
      std::_Exit(1);
    }
  // Not ours: the previous disposition.
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, uc);
    return;
  }
  if (g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != SIG_DFL) {
    g_previous.sa_handler(sig);
    return;
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

} // namespace

void RegisterStackGuards(uintptr_t lo, uintptr_t hi) {
  std::lock_guard<std::mutex> lock(g_guards_mu);
  g_stack_guards.emplace_back(lo, hi);
}

void InstallFaultHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    (void)DeviceMemory::Get();
    // An alternate stack, so that a stack overflow can be reported.
    static char *alt = static_cast<char *>(
        MapOrDie(nullptr, 64 * 1024, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, "mmap (signal stack)"));
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = 64 * 1024;
    (void)::sigaltstack(&ss, nullptr);
    struct sigaction sa {};
    sa.sa_sigaction = OnFault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, &g_previous);
  });
}

} // namespace bt::cuda_emu
