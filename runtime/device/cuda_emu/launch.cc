//===- launch.cc - running a kernel: blocks, fibers, barriers, warp ops ----===//
//
// See emulator.h (RunKernel) and bt_emu_abi.h (the functions the kernels
// call). A launch runs its blocks one after the other (in a permuted order
// under BT_CUDA_EMU_SEED). Kernels that may synchronize (K__bt_emu_flags)
// run one fiber (Boost.Context's fcontext, 64 KiB stack + guard page) per
// thread:
// the scheduler resumes every runnable thread (in a permuted order under the
// seed) until it exits or blocks at a barrier, a shuffle or an mma; when none
// can run, the shuffles whose lanes have all arrived exchange their values,
// the warps whose 32 lanes all wait at one mma compute it (mma.cc), and
// when every live thread waits at the same barrier the barrier opens (a new
// epoch of the shared-memory race check). Any other state is a reported
// synchronization error. Other kernels run each thread as a plain call.
//
// The fibers switch with Boost.Context's jump_fcontext, which saves and
// restores registers only; glibc's swapcontext also saves and sets the
// signal mask, a system call per switch, which made up ~45% of an emulated
// decode step's time (1.96 M rt_sigprocmask calls in one 8-token greedy
// generation of block_tiny). Nothing here changes the signal mask, so there
// is no mask to keep per fiber.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cinttypes>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <random>
#include <unordered_set>
#include <sys/mman.h>

#include <boost/context/detail/fcontext.hpp>

#include "emulator.h"

// AddressSanitizer must be told about every stack switch (its fiber API,
// sanitizer/common_interface_defs.h): otherwise it takes a fiber's frames
// for the scheduler's, and the poisoned redzones that a fiber leaves on a
// stack it never returns from are reported in the next fiber that reuses
// the stack. Without ASan these are no-ops.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BT_EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(BT_EMU_ASAN)
#define BT_EMU_ASAN 1
#endif
#ifdef BT_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace bt::cuda_emu {
namespace {

namespace fctx = boost::context::detail;

constexpr int kWarp = 32;
#ifdef BT_EMU_ASAN
// ASan's redzones make frames several times larger.
constexpr size_t kStackBytes = 256 * 1024;
#else
constexpr size_t kStackBytes = 64 * 1024;
#endif
constexpr size_t kGuardBytes = 4096;
constexpr unsigned kMaxThreads = 1024;

struct Thread {
  BtEmuThread pub; // first: the kernels see a BtEmuThread *
  int linear = 0;  // in the block
  enum State { kRunnable, kBarrier, kShuffle, kMma, kExited } state = kRunnable;
  uint32_t site = 0;
  // The pending shuffle (kind also of the pending mma).
  uint32_t kind = 0, mask = 0, value = 0, b = 0, c = 0, result = 0;
  bool valid = false;
  uint32_t *frags = nullptr; // the pending mma's fragments (bt_emu_mma)
  fctx::fcontext_t context = nullptr; // the suspended fiber
  void *fake_stack = nullptr; // ASan's fake stack of the suspended fiber
};

/// Race-check state of one 4-byte word of shared memory.
struct SharedWord {
  uint32_t write_epoch; // 0: never written in this block
  int32_t writer;
  uint32_t read_epoch;
  int32_t reader; // kManyReaders: more than one thread
};
constexpr int32_t kManyReaders = -2;

/// A read of a shared word that no thread of the block had written: a race
/// if another thread writes it before the next barrier (reported then),
/// else a read of uninitialized shared memory (reported at the barrier).
struct PendingRead {
  uint64_t word;
  int32_t reader;
  uint32_t site;
};

struct Launch {
  const Function *function = nullptr;
  const LaunchConfig *config = nullptr;
  void **params = nullptr;
  uint64_t id = 0;
  uint32_t block[3] = {0, 0, 0};
  uint64_t block_linear = 0;
  unsigned threads_per_block = 0;
  bool fibers = false;
  bool failed = false;
  uint32_t epoch = 1;
  std::vector<Thread> threads;
  std::vector<SharedWord> shared_words;
  std::vector<PendingRead> pending_reads;
  char *smem = nullptr;
  // Traffic (profile.cc): bytes accessed, and the sectors touched.
  KernelProfile profile;
  std::unordered_set<uint64_t> read_sectors, written_sectors;
  fctx::fcontext_t scheduler = nullptr; // while a fiber runs
  void *scheduler_fake_stack = nullptr; // ASan, while a fiber runs
  jmp_buf direct_exit;
};

Launch *g_launch = nullptr;
Thread *g_thread = nullptr;
uint64_t g_launches = 0;

char *g_stacks = nullptr; // kMaxThreads stacks, each after a guard page
char *g_smem = nullptr;   // the block's dynamic shared memory
size_t g_smem_capacity = 0;

char *StackOf(int i) {
  if (g_stacks == nullptr) {
    const size_t each = kStackBytes + kGuardBytes;
    void *p = ::mmap(nullptr, each * kMaxThreads, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::perror("bt cuda-emu: mmap (thread stacks)");
      std::abort();
    }
    g_stacks = static_cast<char *>(p);
    for (unsigned t = 0; t < kMaxThreads; ++t) {
      char *guard = g_stacks + t * each;
      (void)::mprotect(guard, kGuardBytes, PROT_NONE);
      RegisterStackGuards(reinterpret_cast<uintptr_t>(guard),
                          reinterpret_cast<uintptr_t>(guard + kGuardBytes));
    }
  }
  return g_stacks + i * (kStackBytes + kGuardBytes) + kGuardBytes;
}

// The scheduler's stack (the launching thread's), as ASan reports it when
// a fiber first starts; a fiber switches back to it.
#ifdef BT_EMU_ASAN
const void *g_scheduler_stack = nullptr;
size_t g_scheduler_stack_size = 0;
#endif

/// Scheduler -> fiber `t` (thread `i` of the block); returns when the fiber
/// switches back.
void SwitchToFiber(Thread &t, int i) {
#ifdef BT_EMU_ASAN
  __sanitizer_start_switch_fiber(&g_launch->scheduler_fake_stack, StackOf(i),
                                 kStackBytes);
#else
  (void)i;
#endif
  t.context = fctx::jump_fcontext(t.context, nullptr).fctx;
#ifdef BT_EMU_ASAN
  __sanitizer_finish_switch_fiber(g_launch->scheduler_fake_stack, nullptr,
                                  nullptr);
#endif
}

/// First thing a fiber does: completes the scheduler's switch.
void EnterFiber() {
#ifdef BT_EMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack,
                                  &g_scheduler_stack_size);
#endif
}

/// Fiber `t` -> the scheduler; `for_good`: the fiber never runs again (its
/// fake stack is released). Returns when the scheduler resumes `t`.
void SwitchToScheduler(Thread *t, bool for_good) {
#ifdef BT_EMU_ASAN
  __sanitizer_start_switch_fiber(for_good ? nullptr : &t->fake_stack,
                                 g_scheduler_stack, g_scheduler_stack_size);
#else
  (void)for_good;
#endif
  g_launch->scheduler = fctx::jump_fcontext(g_launch->scheduler, nullptr).fctx;
#ifdef BT_EMU_ASAN
  __sanitizer_finish_switch_fiber(t->fake_stack, &g_scheduler_stack,
                                  &g_scheduler_stack_size);
#endif
}

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

std::string Triple(const int32_t *v) {
  char b[64];
  std::snprintf(b, sizeof b, "(%d, %d, %d)", v[0], v[1], v[2]);
  return b;
}

const std::string &SiteName(uint32_t site) {
  static const std::string unknown = "(unknown site)";
  const std::vector<std::string> &sites = g_launch->function->module->sites;
  return site < sites.size() ? sites[site] : unknown;
}

/// "kernel K, block (..), thread (..)" and the site of `t`.
std::vector<std::string> Where(const Thread *t, uint32_t site) {
  std::vector<std::string> lines = {
      "kernel " + g_launch->function->name + ", block " +
          Triple(&t->pub.sreg[BT_EMU_SREG_CTAID_X]) + ", thread " +
          Triple(&t->pub.sreg[BT_EMU_SREG_TID_X])};
  lines.push_back("at " + SiteName(site));
  return lines;
}

/// Ends the launch after a report: a fiber goes back to the scheduler for
/// good, a plain call unwinds to its block loop.
[[noreturn]] void AbortLaunch() {
  g_launch->failed = true;
  if (g_launch->fibers) {
    g_thread->state = Thread::kExited;
    SwitchToScheduler(g_thread, /*for_good=*/true);
    std::abort(); // never resumed
  }
  longjmp(g_launch->direct_exit, 1);
}

/// Reports a failure of thread `t` at `site`; the caller then ends the
/// launch with AbortLaunch() in a statement of its own, so that the message's
/// temporaries (built in the caller's frame, which AbortLaunch leaves for
/// good) are freed first.
void ReportAt(const Thread *t, uint32_t site, const std::string &what,
              std::vector<std::string> more = {}) {
  std::vector<std::string> lines = Where(t, site);
  lines.insert(lines.end(), more.begin(), more.end());
  Report(what, lines);
}

/// Blocks the running fiber until the scheduler resumes it.
void Block(Thread *t) {
  if (!g_launch->fibers) {
    ReportAt(t, t->site,
             "internal error: a kernel not marked as synchronizing reached a "
             "barrier or a shuffle");
    AbortLaunch();
  }
  SwitchToScheduler(t, /*for_good=*/false);
  if (g_launch->failed)
    AbortLaunch();
}

/// A fiber's entry (make_fcontext); `from` is the scheduler that started it.
/// Never returns (a fiber function that returns ends the process).
void FiberMain(fctx::transfer_t from) {
  g_launch->scheduler = from.fctx;
  EnterFiber();
  Thread *t = g_thread;
  g_launch->function->entry(g_launch->params);
  t->state = Thread::kExited;
  SwitchToScheduler(t, /*for_good=*/true);
  std::abort(); // never resumed
}

void SetUpThread(Thread &t, int linear) {
  const LaunchConfig &cfg = *g_launch->config;
  const unsigned bx = cfg.block[0], by = cfg.block[1];
  t.linear = linear;
  int32_t *s = t.pub.sreg;
  s[BT_EMU_SREG_TID_X] = static_cast<int32_t>(linear % bx);
  s[BT_EMU_SREG_TID_Y] = static_cast<int32_t>(linear / bx % by);
  s[BT_EMU_SREG_TID_Z] = static_cast<int32_t>(linear / (bx * by));
  for (int d = 0; d < 3; ++d) {
    s[BT_EMU_SREG_NTID_X + d] = static_cast<int32_t>(cfg.block[d]);
    s[BT_EMU_SREG_CTAID_X + d] = static_cast<int32_t>(g_launch->block[d]);
    s[BT_EMU_SREG_NCTAID_X + d] = static_cast<int32_t>(cfg.grid[d]);
  }
  s[BT_EMU_SREG_LANEID] = linear % kWarp;
  s[BT_EMU_SREG_WARPSIZE] = kWarp;
  t.pub.smem = g_launch->smem;
  t.state = Thread::kRunnable;
}

std::string DescribeState(const Thread &t) {
  switch (t.state) {
  case Thread::kExited:
    return "has exited";
  case Thread::kBarrier:
    return "waits at the barrier " + SiteName(t.site);
  case Thread::kShuffle:
    return "waits at the shuffle " + SiteName(t.site);
  case Thread::kMma:
    return "waits at the mma " + SiteName(t.site);
  default:
    return "is running";
  }
}

/// The shuffles of the block whose lanes have all arrived exchange their
/// values (PTX shfl.sync). Returns whether any did; reports (and fails the
/// launch) for a shuffle whose mask names a lane that is not at it.
bool ResolveShuffles(std::vector<Thread> &threads) {
  bool progress = false;
  const int n = static_cast<int>(threads.size());
  for (Thread &t : threads) {
    if (t.state != Thread::kShuffle)
      continue;
    const int lane = t.linear % kWarp, warp0 = t.linear - lane;
    if (((t.mask >> lane) & 1u) == 0) {
      Report("shuffle by a lane that is not in its own mask",
             [&] {
               auto w = Where(&t, t.site);
               w.push_back("mask " + Hex(t.mask) + ", lane " +
                           std::to_string(lane));
               return w;
             }());
      return g_launch->failed = true, false;
    }
    for (int j = 0; j < kWarp; ++j) {
      if (((t.mask >> j) & 1u) == 0)
        continue;
      const int other = warp0 + j;
      const Thread *o = other < n ? &threads[other] : nullptr;
      if (o != nullptr && o->state == Thread::kShuffle && o->site == t.site &&
          o->mask == t.mask)
        continue;
      std::vector<std::string> w = Where(&t, t.site);
      w.push_back("mask " + Hex(t.mask) + " names lane " + std::to_string(j) +
                  ", which " +
                  (o == nullptr ? std::string("does not exist (the block has ") +
                                      std::to_string(n) + " threads)"
                   : o->state == Thread::kShuffle && o->site == t.site
                       ? "is at this shuffle with mask " + Hex(o->mask)
                       : DescribeState(*o)));
      Report("shuffle whose mask names a lane that is not at the same shuffle",
             w);
      g_launch->failed = true;
      return false;
    }
  }
  // Every waiting lane's partners are here: exchange (all lanes of a group
  // read the values before any result is set).
  for (Thread &t : threads) {
    if (t.state != Thread::kShuffle)
      continue;
    const int lane = t.linear % kWarp, warp0 = t.linear - lane;
    const int bval = static_cast<int>(t.b & 31u);
    const int cval = static_cast<int>(t.c & 31u);
    const int segmask = static_cast<int>((t.c >> 8) & 31u);
    const int max_lane = (lane & segmask) | (cval & ~segmask);
    const int min_lane = lane & segmask;
    int j = lane;
    bool pval = false;
    switch (t.kind) {
    case BT_EMU_SHFL_UP:
      j = lane - bval;
      pval = j >= max_lane;
      break;
    case BT_EMU_SHFL_DOWN:
      j = lane + bval;
      pval = j <= max_lane;
      break;
    case BT_EMU_SHFL_BFLY:
      j = lane ^ bval;
      pval = j <= max_lane;
      break;
    default: // idx
      j = min_lane | (bval & ~segmask);
      pval = j <= max_lane;
      break;
    }
    if (!pval)
      j = lane;
    if (((t.mask >> j) & 1u) == 0) {
      Report("shuffle reads lane " + std::to_string(j) +
                 ", which is not in the mask (its value is undefined)",
             [&] {
               auto w = Where(&t, t.site);
               w.push_back("mask " + Hex(t.mask));
               return w;
             }());
      g_launch->failed = true;
      return false;
    }
    t.result = threads[warp0 + j].value;
    t.valid = pval;
  }
  for (Thread &t : threads)
    if (t.state == Thread::kShuffle) {
      t.state = Thread::kRunnable;
      progress = true;
    }
  return progress;
}

/// The warps of the block whose 32 lanes all wait at the same mma compute it
/// (PTX mma.sync.aligned: every lane of the warp executes the same mma).
/// Returns whether any did; reports (and fails the launch) for a warp with a
/// lane at an mma and a lane that is not at it, or an unknown kind.
bool ResolveMmas(std::vector<Thread> &threads) {
  const int n = static_cast<int>(threads.size());
  bool progress = false;
  for (int warp0 = 0; warp0 < n; warp0 += kWarp) {
    const Thread *first = nullptr;
    for (int j = 0; j < kWarp && warp0 + j < n && first == nullptr; ++j)
      if (threads[warp0 + j].state == Thread::kMma)
        first = &threads[warp0 + j];
    if (first == nullptr)
      continue;
    uint32_t *frags[kWarp];
    for (int j = 0; j < kWarp; ++j) {
      const Thread *o = warp0 + j < n ? &threads[warp0 + j] : nullptr;
      if (o != nullptr && o->state == Thread::kMma && o->site == first->site &&
          o->kind == first->kind) {
        frags[j] = o->frags;
        continue;
      }
      std::vector<std::string> w = Where(first, first->site);
      w.push_back(
          "lane " + std::to_string(j) + " of the warp " +
          (o == nullptr ? std::string("does not exist (the block has ") +
                              std::to_string(n) + " threads)"
                        : DescribeState(*o)));
      Report("mma.sync reached by a warp whose 32 lanes are not all at it", w);
      return g_launch->failed = true, false;
    }
    if (first->kind != BT_EMU_MMA_M16N8K16_BF16_F32) {
      std::vector<std::string> w = Where(first, first->site);
      w.push_back("kind " + std::to_string(first->kind));
      Report("mma of a kind this emulator does not know (bt_emu_abi.h)", w);
      return g_launch->failed = true, false;
    }
    MmaM16N8K16Bf16F32(frags);
    for (int j = 0; j < kWarp; ++j)
      threads[warp0 + j].state = Thread::kRunnable;
    progress = true;
  }
  return progress;
}

/// Sets up thread `i` of the block as a fiber that starts the kernel.
__attribute__((noinline)) void MakeFiber(Thread &t, int i) {
  SetUpThread(t, i);
#ifdef BT_EMU_ASAN
  // A fiber that ended in AbortLaunch (or a barrier never opened) left its
  // frames' redzones poisoned on this stack.
  __asan_unpoison_memory_region(StackOf(i), kStackBytes);
#endif
  t.fake_stack = nullptr;
  // make_fcontext takes the top of the stack (it grows down).
  t.context = fctx::make_fcontext(StackOf(i) + kStackBytes, kStackBytes,
                                  FiberMain);
}

/// At a barrier and at the end of a block: a read of a shared word that no
/// thread has written since is a read of uninitialized shared memory.
bool CheckPendingReads() {
  for (const PendingRead &r : g_launch->pending_reads) {
    if (g_launch->shared_words[r.word].write_epoch != 0)
      continue;
    std::vector<std::string> w = Where(&g_launch->threads[r.reader], r.site);
    w.push_back("offset " + std::to_string(r.word * 4) +
                ": no thread of this block wrote it");
    Report("read of uninitialized shared memory", w);
    g_launch->failed = true;
    return false;
  }
  g_launch->pending_reads.clear();
  return true;
}

/// Runs the current block with one fiber per thread.
void RunBlockFibers(std::mt19937_64 *rng) {
  std::vector<Thread> &threads = g_launch->threads;
  const int n = static_cast<int>(threads.size());
  for (int i = 0; i < n; ++i)
    MakeFiber(threads[i], i);
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i)
    order[i] = i;
  for (;;) {
    bool ran = true;
    while (ran) {
      ran = false;
      if (rng != nullptr)
        std::shuffle(order.begin(), order.end(), *rng);
      for (int i : order) {
        Thread &t = threads[i];
        if (t.state != Thread::kRunnable)
          continue;
        g_thread = &t;
        SwitchToFiber(t, i);
        g_thread = nullptr;
        ran = true;
        if (g_launch->failed)
          return;
      }
    }
    // Nothing can run: shuffles and mmas, then the barrier.
    bool shuffles = false, mmas = false;
    for (const Thread &t : threads) {
      shuffles |= t.state == Thread::kShuffle;
      mmas |= t.state == Thread::kMma;
    }
    if (shuffles && !ResolveShuffles(threads))
      return; // reported
    if (mmas && !ResolveMmas(threads))
      return; // reported
    if (shuffles || mmas)
      continue;
    const Thread *first = nullptr;
    int live = 0;
    for (const Thread &t : threads) {
      if (t.state == Thread::kExited)
        continue;
      ++live;
      if (first == nullptr)
        first = &t;
    }
    if (!CheckPendingReads())
      return;
    if (live == 0)
      return; // the block is done
    for (const Thread &t : threads) {
      if (t.state == Thread::kExited || t.site == first->site)
        continue;
      std::vector<std::string> w = Where(first, first->site);
      w.push_back("while thread " + Triple(&t.pub.sreg[BT_EMU_SREG_TID_X]) +
                  " waits at " + SiteName(t.site));
      Report("barrier reached at different sites by the threads of a block",
             w);
      g_launch->failed = true;
      return;
    }
    ++g_launch->epoch;
    for (Thread &t : threads)
      if (t.state == Thread::kBarrier)
        t.state = Thread::kRunnable;
  }
}

/// Runs the kernel for g_thread as a plain call (AbortLaunch unwinds here).
__attribute__((noinline)) void CallEntry() {
  if (setjmp(g_launch->direct_exit) == 0)
    g_launch->function->entry(g_launch->params);
}

/// Runs the current block as plain calls, thread after thread.
void RunBlockDirect(std::mt19937_64 *rng) {
  std::vector<Thread> &threads = g_launch->threads;
  const int n = static_cast<int>(threads.size());
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i)
    order[i] = i;
  if (rng != nullptr)
    std::shuffle(order.begin(), order.end(), *rng);
  for (int i : order) {
    Thread &t = threads[i];
    SetUpThread(t, i);
    g_thread = &t;
    CallEntry();
    g_thread = nullptr;
    if (g_launch->failed)
      return;
  }
  (void)CheckPendingReads();
}

/// Global-memory checks of bt_emu_load / bt_emu_store.
char *CheckGlobal(Thread *t, uint64_t a, uint32_t bytes, uint32_t site,
                  bool store) {
  DeviceMemory &m = DeviceMemory::Get();
  const char *what = store ? "store" : "load";
  // Natural alignment (checked below) keeps an access inside one sector.
  if (store) {
    g_launch->profile.access_written += bytes;
    g_launch->written_sectors.insert(a >> 5);
  } else {
    g_launch->profile.access_read += bytes;
    g_launch->read_sectors.insert(a >> 5);
  }
  if (!m.InLive(a, bytes)) {
    bool inside = false;
    const Allocation *al = m.Find(a, &inside);
    const bool freed = al != nullptr && inside && !al->live;
    ReportAt(t, site,
             std::string(freed ? "use after free: " : "out-of-bounds ") + what +
                 " of " + std::to_string(bytes) + " bytes of global memory",
             {"address " + Hex(a) + ": " + m.Describe(a, bytes)});
    AbortLaunch();
  }
  if (a % bytes != 0) {
    ReportAt(t, site,
             std::string("misaligned ") + what + " of " +
                 std::to_string(bytes) + " bytes of global memory",
             {"address " + Hex(a) + ": " + m.Describe(a, bytes)});
    AbortLaunch();
  }
  if (!store) {
    const uint64_t u = m.FirstUninitialized(a, bytes);
    if (u != UINT64_MAX) {
      ReportAt(t, site,
               "read of uninitialized global memory (" + std::to_string(bytes) +
                   " bytes)",
               {"address " + Hex(a) + ": " + m.Describe(a, bytes) + "; byte " +
                Hex(u) +
                " was never written (the allocation is "
                "filled with NaN)"});
      AbortLaunch();
    }
    return m.Host(a);
  }
  // Conflicting writes within one launch: the shadow holds the launch and
  // the thread that last stored each 4-byte word.
  if (bytes >= 4) {
    const uint64_t launch = g_launch->id & 0xffffffu;
    const uint64_t gtid = g_launch->block_linear *
                              g_launch->threads_per_block +
                          static_cast<uint64_t>(t->linear);
    const uint64_t key = (launch << 40) | (gtid + 1);
    uint64_t *w = m.WriteShadow(a);
    for (uint32_t i = 0; i < bytes / 4; ++i) {
      if ((w[i] >> 40) == launch && w[i] != key) {
        const uint64_t other = (w[i] & ((uint64_t{1} << 40) - 1)) - 1;
        const uint64_t tpb = g_launch->threads_per_block;
        ReportAt(t, site,
                 "conflicting writes to global memory within one launch",
                 {"address " + Hex(a + 4 * i) + ": " + m.Describe(a + 4 * i, 4),
                  "also written by thread " + std::to_string(other % tpb) +
                      " (linear) of block " + std::to_string(other / tpb) +
                      " (linear)"});
        AbortLaunch();
      }
      w[i] = key;
    }
  }
  m.SetInitialized(a, bytes);
  return m.Host(a);
}

/// Shared-memory checks: bounds, alignment, uninitialized reads, races
/// between two barriers.
char *CheckShared(Thread *t, uint64_t a, uint32_t bytes, uint32_t site,
                  bool store) {
  const uint64_t base = reinterpret_cast<uint64_t>(g_launch->smem);
  const uint64_t size = g_launch->config->smem;
  const char *what = store ? "store" : "load";
  const uint64_t off = a - base;
  if (off > size || bytes > size - off) {
    ReportAt(t, site,
             std::string("out-of-bounds ") + what + " of " +
                 std::to_string(bytes) + " bytes of shared memory",
             {"offset " + std::to_string(static_cast<int64_t>(off)) +
              " of the block's " + std::to_string(size) +
              " bytes of dynamic shared memory"});
    AbortLaunch();
  }
  if (a % bytes != 0) {
    ReportAt(t, site,
             std::string("misaligned ") + what + " of " +
                 std::to_string(bytes) + " bytes of shared memory",
             {"offset " + std::to_string(off)});
    AbortLaunch();
  }
  const uint32_t e = g_launch->epoch;
  const int32_t me = t->linear;
  auto tid = [&](int32_t linear) {
    return "thread " + Triple(&g_launch->threads[linear].pub.sreg[0]);
  };
  for (uint64_t wi = off / 4; wi <= (off + bytes - 1) / 4; ++wi) {
    SharedWord &w = g_launch->shared_words[wi];
    if (!store) {
      if (w.write_epoch == 0)
        g_launch->pending_reads.push_back({wi, me, site});
      if (w.write_epoch == e && w.writer != me) {
        ReportAt(t, site,
                 "shared-memory race: read of a word that " + tid(w.writer) +
                     " wrote since the last barrier",
                 {"offset " + std::to_string(wi * 4)});
        AbortLaunch();
      }
      if (w.read_epoch != e) {
        w.read_epoch = e;
        w.reader = me;
      } else if (w.reader != me) {
        w.reader = kManyReaders;
      }
    } else {
      if (w.write_epoch == e && w.writer != me) {
        ReportAt(t, site,
                 "shared-memory race: write of a word that " + tid(w.writer) +
                     " wrote since the last barrier",
                 {"offset " + std::to_string(wi * 4)});
        AbortLaunch();
      }
      if (w.read_epoch == e && w.reader != me) {
        ReportAt(t, site,
                 "shared-memory race: write of a word that " +
                     (w.reader == kManyReaders ? std::string("other threads")
                                               : tid(w.reader)) +
                     " read since the last barrier",
                 {"offset " + std::to_string(wi * 4)});
        AbortLaunch();
      }
      w.write_epoch = e;
      w.writer = me;
    }
  }
  return reinterpret_cast<char *>(a);
}

void *Access(BtEmuThread *pub, void *addr, uint32_t bytes, uint32_t site,
             bool store) {
  Thread *t = reinterpret_cast<Thread *>(pub);
  const uint64_t a = reinterpret_cast<uint64_t>(addr);
  const uint64_t smem = reinterpret_cast<uint64_t>(g_launch->smem);
  if (bytes == 0)
    return addr;
  if (g_launch->config->smem > 0 && a - smem <= g_launch->config->smem + 64)
    return CheckShared(t, a, bytes, site, store);
  if (DeviceMemory::Get().IsDevice(a))
    return CheckGlobal(t, a, bytes, site, store);
  ReportAt(
      t, site,
      std::string(store ? "store" : "load") + " of " + std::to_string(bytes) +
          " bytes at " + Hex(a) +
          ", which is neither device memory nor the block's shared memory");
  AbortLaunch();
}

} // namespace

bool RunKernel(const Function &f, const LaunchConfig &config, void **params) {
  Launch launch;
  launch.function = &f;
  launch.config = &config;
  launch.params = params;
  launch.id = ++g_launches;
  if (GetSettings().trace)
    std::fprintf(stderr,
                 "bt cuda-emu trace: launch %lu: %s grid (%u, %u, %u) block (%u, %u, "
                 "%u) dynamic shared memory %u bytes\n",
                 static_cast<unsigned long>(launch.id), f.name.c_str(),
                 config.grid[0], config.grid[1], config.grid[2],
                 config.block[0], config.block[1], config.block[2],
                 config.smem);
  launch.fibers = f.sync;
  launch.threads_per_block = config.block[0] * config.block[1] * config.block[2];
  launch.threads.resize(launch.threads_per_block);
  if (config.smem > 0) {
    // One buffer for the block that runs (plus slack for the bounds check of
    // a pointer just past its end); NaN-filled per block.
    if (g_smem_capacity < config.smem) {
      std::free(g_smem);
      g_smem_capacity = std::max<size_t>(config.smem, 64 * 1024);
      g_smem = static_cast<char *>(std::aligned_alloc(256, g_smem_capacity));
    }
    launch.smem = g_smem;
    launch.shared_words.resize((config.smem + 3) / 4);
  }
  g_launch = &launch;
  const uint64_t seed = GetSettings().seed;
  std::mt19937_64 rng_storage(seed);
  std::mt19937_64 *rng = seed != 0 ? &rng_storage : nullptr;

  const uint64_t gx = config.grid[0], gy = config.grid[1], gz = config.grid[2];
  const uint64_t blocks = gx * gy * gz;
  std::vector<uint64_t> order;
  if (rng != nullptr) {
    order.resize(blocks);
    for (uint64_t i = 0; i < blocks; ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), *rng);
  }
  for (uint64_t i = 0; i < blocks && !launch.failed; ++i) {
    const uint64_t b = rng != nullptr ? order[i] : i;
    launch.block_linear = b;
    launch.block[0] = static_cast<uint32_t>(b % gx);
    launch.block[1] = static_cast<uint32_t>(b / gx % gy);
    launch.block[2] = static_cast<uint32_t>(b / (gx * gy));
    launch.epoch = 1;
    if (config.smem > 0) {
      uint32_t *w = reinterpret_cast<uint32_t *>(launch.smem);
      for (size_t k = 0; k < (config.smem + 3) / 4; ++k)
        w[k] = 0x7fc00000u;
      std::memset(launch.shared_words.data(), 0,
                  launch.shared_words.size() * sizeof(SharedWord));
      launch.pending_reads.clear();
    }
    if (launch.fibers)
      RunBlockFibers(rng);
    else
      RunBlockDirect(rng);
  }
  g_launch = nullptr;
  launch.profile.launches = 1;
  launch.profile.sector_read = 32 * launch.read_sectors.size();
  launch.profile.sector_written = 32 * launch.written_sectors.size();
  ProfileAdd(f.name, launch.profile);
  return !launch.failed;
}

} // namespace bt::cuda_emu

//===----------------------------------------------------------------------===//
// The functions the kernels call (bt_emu_abi.h)
//===----------------------------------------------------------------------===//

using namespace bt::cuda_emu;

extern "C" {

__attribute__((visibility("default"))) BtEmuThread *bt_emu_thread(void) {
  return g_thread != nullptr ? &g_thread->pub : nullptr;
}

__attribute__((visibility("default"))) void *
bt_emu_load(BtEmuThread *t, void *addr, uint32_t bytes, uint32_t site) {
  return Access(t, addr, bytes, site, /*store=*/false);
}

__attribute__((visibility("default"))) void *
bt_emu_store(BtEmuThread *t, void *addr, uint32_t bytes, uint32_t site) {
  return Access(t, addr, bytes, site, /*store=*/true);
}

__attribute__((visibility("default"))) void bt_emu_barrier(BtEmuThread *pub,
                                                           uint32_t site) {
  Thread *t = reinterpret_cast<Thread *>(pub);
  t->state = Thread::kBarrier;
  t->site = site;
  Block(t);
}

__attribute__((visibility("default"))) uint32_t
bt_emu_shfl(BtEmuThread *pub, uint32_t kind, uint32_t mask, uint32_t value,
            uint32_t b, uint32_t c, uint32_t site, uint8_t *valid) {
  Thread *t = reinterpret_cast<Thread *>(pub);
  t->state = Thread::kShuffle;
  t->site = site;
  t->kind = kind;
  t->mask = mask;
  t->value = value;
  t->b = b;
  t->c = c;
  Block(t);
  *valid = t->valid ? 1 : 0;
  return t->result;
}

__attribute__((visibility("default"))) void
bt_emu_mma(BtEmuThread *pub, uint32_t kind, uint32_t *frags, uint32_t site) {
  Thread *t = reinterpret_cast<Thread *>(pub);
  t->state = Thread::kMma;
  t->site = site;
  t->kind = kind;
  t->frags = frags;
  Block(t);
}

__attribute__((visibility("default"))) void bt_emu_trap(BtEmuThread *pub,
                                                        uint32_t site) {
  ReportAt(reinterpret_cast<Thread *>(pub), site,
           "kernel trap (llvm.trap): the launch fails "
           "(CUDA_ERROR_LAUNCH_FAILED on a GPU)");
  AbortLaunch();
}

} // extern "C"
