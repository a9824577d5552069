//===- driver.cc - the emulator's CUDA driver API -------------------------===//
//
// The entry points of cuda_emu.h (LookupSymbol): the subset of the CUDA
// driver API that runtime/device/cuda/cuda.cc resolves, with the C
// signatures of cuda.h, on the emulated device (cuBLAS and cuBLASLt:
// cublas.cc). Launch limits are those of sm_90.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <memory>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

#include "cblas.h"
#include "cuda_emu.h"
#include "emulator.h"

namespace bt::cuda_emu {

std::string Hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2,
                   kInvalidImage = 200, kInvalidHandle = 400,
                   kIllegalState = 401, kNotFound = 500,
                   kIllegalAddress = 700, kLaunchFailed = 719,
                   kCaptureUnsupported = 900, kCaptureInvalidated = 901,
                   kCaptureUnmatched = 903;

// sm_90 limits (CUDA C Programming Guide, "Technical Specifications per
// Compute Capability").
constexpr unsigned kMaxThreadsPerBlock = 1024, kMaxBlockXY = 1024,
                   kMaxBlockZ = 64, kMaxGridYZ = 65535;
constexpr unsigned long long kMaxGridX = 2147483647ull;
constexpr unsigned kDefaultMaxDynamicShared = 48 * 1024;

std::recursive_mutex g_mu;
int g_context, g_stream;
long g_reports_at_sync = 0;

//===----------------------------------------------------------------------===//
// Stream capture and graphs
//===----------------------------------------------------------------------===//


/// One node of a captured graph: a kernel launch (its parameter values
/// copied), a memset or a GEMM, in stream order (the graph is a chain).
struct GraphNode {
  enum Kind { kKernel, kMemset, kGemm, kCopy } kind = kKernel;
  const Function *function = nullptr;
  LaunchConfig config{};
  std::vector<std::vector<char>> params; // kKernel: one value per parameter
  uint64_t dst = 0, bytes = 0;           // kMemset, kCopy
  uint64_t src = 0;                      // kCopy
  unsigned char value = 0;
  GemmCall gemm{};                       // kGemm
};

/// A CUgraph (cuStreamEndCapture) or CUgraphExec (cuGraphInstantiate).
struct Graph {
  std::vector<GraphNode> nodes;
};

/// The capture in progress on the stream (one stream: one capture).
struct Capture {
  bool active = false;
  bool invalidated = false;
  int mode = 0; // CU_STREAM_CAPTURE_MODE_*: 0 global, 1 thread-local, 2 relaxed
  std::unique_ptr<Graph> graph;
};
Capture g_capture;

/// A call that cannot be captured, made while the stream captures:
/// invalidates the capture (cuStreamEndCapture then fails).
CUresult Unsupported() {
  g_capture.invalidated = true;
  return kCaptureUnsupported;
}

/// The size of an ELF image from its header (the section headers come
/// last in what ld.lld writes), as a driver sizes a cubin.
size_t ElfSize(const void *image) {
  const auto *h = static_cast<const Elf64_Ehdr *>(image);
  if (std::memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 ||
      h->e_ident[EI_CLASS] != ELFCLASS64)
    return 0;
  size_t end = h->e_shoff + size_t{h->e_shnum} * h->e_shentsize;
  return std::max<size_t>(end, h->e_phoff + size_t{h->e_phnum} * h->e_phentsize);
}

CUresult ModuleLoad(void **module, const void *image, unsigned n, int *options,
                    void **values) {
  auto log = [&](const std::string &msg) {
    for (unsigned i = 0; i < n; ++i)
      if (options[i] == 5) // CU_JIT_ERROR_LOG_BUFFER
        for (unsigned j = 0; j < n; ++j)
          if (options[j] == 6) // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
            std::snprintf(static_cast<char *>(values[i]),
                          reinterpret_cast<uintptr_t>(values[j]), "%s",
                          msg.c_str());
  };
  const size_t size = ElfSize(image);
  if (size == 0) {
    log("cuda-emu: the module image is not the emulator's kernel library "
        "(an ELF shared object from bt-nvvm-to-host; PTX cannot be "
        "emulated): compile the artifact with a bt-run that writes the "
        "cuda_emu section");
    return kInvalidImage;
  }
  auto m = std::make_unique<Module>();
  m->fd = ::memfd_create("bt-cuda-emu-kernels", MFD_CLOEXEC);
  if (m->fd < 0 || ::write(m->fd, image, size) != static_cast<ssize_t>(size)) {
    log("cuda-emu: cannot write the kernel library to a memfd");
    return kInvalidImage;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(m->fd);
  m->handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (m->handle == nullptr) {
    const char *e = ::dlerror();
    log(std::string("cuda-emu: cannot load the kernel library: ") +
        (e ? e : "?"));
    ::close(m->fd);
    return kInvalidImage;
  }
  const auto *version =
      static_cast<const uint32_t *>(::dlsym(m->handle, "bt_emu_abi_version"));
  const auto *count =
      static_cast<const uint32_t *>(::dlsym(m->handle, "bt_emu_num_sites"));
  const char *table =
      static_cast<const char *>(::dlsym(m->handle, "bt_emu_site_table"));
  if (version == nullptr || *version != BT_EMU_ABI_VERSION ||
      count == nullptr || table == nullptr) {
    log("cuda-emu: the kernel library has no bt_emu_abi_version " +
        std::to_string(BT_EMU_ABI_VERSION) + " or no site table");
    ::dlclose(m->handle);
    ::close(m->fd);
    return kInvalidImage;
  }
  for (uint32_t i = 0; i < *count; ++i) {
    m->sites.emplace_back(table);
    table += m->sites.back().size() + 1;
  }
  *module = m.release();
  return kSuccess;
}

//===----------------------------------------------------------------------===//
// Driver API
//===----------------------------------------------------------------------===//

CUresult emu_cuInit(unsigned) {
  InstallFaultHandler();
  return kSuccess;
}
CUresult emu_cuDriverGetVersion(int *v) {
  *v = 13000;
  return kSuccess;
}
CUresult emu_cuDeviceGetCount(int *n) {
  *n = 1;
  return kSuccess;
}
CUresult emu_cuDeviceGet(int *d, int ordinal) {
  if (ordinal != 0)
    return kInvalidValue;
  *d = 0;
  return kSuccess;
}
CUresult emu_cuDeviceGetName(char *name, int len, int) {
  std::snprintf(name, static_cast<size_t>(len),
                "bt CUDA emulator (kernels on the CPU)");
  return kSuccess;
}
CUresult emu_cuDeviceTotalMem_v2(size_t *bytes, int) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  *bytes = static_cast<size_t>(pages) * static_cast<size_t>(::getpagesize());
  if (const uint64_t limit = GetSettings().memory_limit; limit != 0)
    *bytes = static_cast<size_t>(limit);
  return kSuccess;
}
CUresult emu_cuDeviceGetAttribute(int *v, int attr, int) {
  *v = attr == 75 ? 9 : 0; // compute capability 9.0 (sm_90)
  return kSuccess;
}
CUresult emu_cuDevicePrimaryCtxRetain(void **ctx, int) {
  *ctx = &g_context;
  return kSuccess;
}
CUresult emu_cuDevicePrimaryCtxRelease_v2(int) { return kSuccess; }
CUresult emu_cuCtxSetCurrent(void *ctx) {
  return ctx == &g_context ? kSuccess : kInvalidValue;
}
CUresult emu_cuStreamCreate(void **s, unsigned) {
  *s = &g_stream;
  return kSuccess;
}
CUresult emu_cuStreamDestroy_v2(void *) { return kSuccess; }
CUresult emu_cuStreamSynchronize(void *s) {
  // Work runs synchronously; a report since the last synchronization fails
  // it (as a sticky error of the context would).
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != &g_stream)
    return kInvalidValue;
  if (g_capture.active)
    return Unsupported();
  const long now = ReportCount();
  const bool clean = now == g_reports_at_sync;
  g_reports_at_sync = now;
  return clean ? kSuccess : kIllegalAddress;
}
CUresult emu_cuModuleLoadDataEx(void **module, const void *image, unsigned n,
                                int *options, void **values) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return ModuleLoad(module, image, n, options, values);
}
CUresult emu_cuModuleUnload(void *module) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Module *m = static_cast<Module *>(module);
  // Functions of the module may still be referenced; the library stays
  // loaded (as the runtime's kernel libraries do until exit).
  delete m;
  return kSuccess;
}
CUresult emu_cuModuleGetFunction(void **fn, void *module, const char *name) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  Module *m = static_cast<Module *>(module);
  auto f = std::make_unique<Function>();
  f->module = m;
  f->name = name;
  f->entry = reinterpret_cast<KernelEntry>(::dlsym(m->handle, name));
  const auto *flags = static_cast<const uint32_t *>(
      ::dlsym(m->handle, (std::string(name) + "__bt_emu_flags").c_str()));
  if (f->entry == nullptr || flags == nullptr)
    return kNotFound;
  f->sync = (*flags & BT_EMU_KERNEL_SYNC) != 0;
  f->param_bytes = static_cast<const int32_t *>(
      ::dlsym(m->handle, (std::string(name) + "__bt_emu_param_bytes").c_str()));
  if (f->param_bytes == nullptr)
    return kNotFound;
  *fn = f.release(); // lives as long as the process (like a CUfunction)
  return kSuccess;
}

CUresult emu_cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz,
                            unsigned bx, unsigned by, unsigned bz,
                            unsigned smem, void *stream, void **params,
                            void **extra) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  const Function &f = *static_cast<Function *>(fn);
  if (stream != &g_stream || extra != nullptr)
    return kInvalidValue;
  char dims[256];
  std::snprintf(dims, sizeof dims, "grid (%u, %u, %u), block (%u, %u, %u), %u "
                "bytes of dynamic shared memory", gx, gy, gz, bx, by, bz, smem);
  std::string problem;
  const unsigned long long threads =
      static_cast<unsigned long long>(bx) * by * bz;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
    problem = "a grid or block dimension is 0";
  else if (threads > kMaxThreadsPerBlock)
    problem = std::to_string(threads) + " threads per block (sm_90: at most " +
              std::to_string(kMaxThreadsPerBlock) + ")";
  else if (bx > kMaxBlockXY || by > kMaxBlockXY || bz > kMaxBlockZ)
    problem = "a block dimension exceeds sm_90's (1024, 1024, 64)";
  else if (gx > kMaxGridX || gy > kMaxGridYZ || gz > kMaxGridYZ)
    problem = "a grid dimension exceeds sm_90's (2^31 - 1, 65535, 65535)";
  else if (smem > kDefaultMaxDynamicShared)
    problem = std::to_string(smem) +
              " bytes of dynamic shared memory: above 48 KiB a kernel must "
              "opt in (cuFuncSetAttribute "
              "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES), and this "
              "one did not";
  if (!problem.empty()) {
    Report("launch of kernel " + f.name + " outside sm_90's limits: " + problem,
           {dims});
    return kInvalidValue;
  }
  LaunchConfig config{{gx, gy, gz}, {bx, by, bz}, smem};
  if (g_capture.active) {
    if (f.param_bytes == nullptr) {
      Report("stream capture of kernel " + f.name +
                 ", which has no parameter sizes (K__bt_emu_param_bytes)",
             {dims});
      return Unsupported();
    }
    GraphNode node;
    node.function = &f;
    node.config = config;
    for (int32_t i = 0; i < f.param_bytes[0]; ++i) {
      const char *value = static_cast<const char *>(params[i]);
      node.params.emplace_back(value, value + f.param_bytes[1 + i]);
    }
    g_capture.graph->nodes.push_back(std::move(node));
    return kSuccess;
  }
  return RunKernel(f, config, params) ? kSuccess : kLaunchFailed;
}

CUresult emu_cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  // Unsafe during a capture unless it is relaxed (CUDA's rule for global
  // and thread-local modes).
  if (g_capture.active && g_capture.mode != 2)
    return Unsupported();
  const uint64_t a = DeviceMemory::Get().Allocate(bytes);
  if (a == 0)
    return kOutOfMemory;
  *p = a;
  return kSuccess;
}
CUresult emu_cuMemFree_v2(CUdeviceptr p) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (g_capture.active && g_capture.mode != 2)
    return Unsupported();
  if (!DeviceMemory::Get().Free(p)) {
    Report("cuMemFree of " + Hex(p) + ", which is not a live allocation",
           {DeviceMemory::Get().Describe(p, 1)});
    return kInvalidValue;
  }
  return kSuccess;
}

/// The checks of a copy's device side.
bool CheckCopy(const char *what, uint64_t device, size_t bytes, bool read) {
  DeviceMemory &m = DeviceMemory::Get();
  if (!m.InLive(device, bytes)) {
    Report(std::string(what) + " of " + std::to_string(bytes) +
               " bytes outside a live device allocation",
           {"device address " + Hex(device) + ": " + m.Describe(device, bytes)});
    return false;
  }
  (void)read;
  return true;
}

CUresult emu_cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (g_capture.active) // synchronous: never part of a capture
    return Unsupported();
  if (bytes == 0)
    return kSuccess;
  if (!CheckCopy("cuMemcpyDtoH", src, bytes, true))
    return kIllegalAddress;
  std::memcpy(dst, DeviceMemory::Get().Host(src), bytes);
  return kSuccess;
}
CUresult emu_cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t bytes) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (g_capture.active)
    return Unsupported();
  if (bytes == 0)
    return kSuccess;
  if (!CheckCopy("cuMemcpyHtoD", dst, bytes, false))
    return kIllegalAddress;
  std::memcpy(DeviceMemory::Get().Host(dst), src, bytes);
  DeviceMemory::Get().SetInitialized(dst, bytes);
  return kSuccess;
}
/// Appends a memset or copy node to the capture in progress.
CUresult Record(GraphNode::Kind kind, uint64_t dst, uint64_t src,
                uint64_t bytes, unsigned char value) {
  GraphNode node;
  node.kind = kind;
  node.dst = dst;
  node.src = src;
  node.bytes = bytes;
  node.value = value;
  g_capture.graph->nodes.push_back(std::move(node));
  return kSuccess;
}
CUresult Memset(CUdeviceptr dst, unsigned char value, size_t bytes) {
  if (!CheckCopy("cuMemsetD8Async", dst, bytes, false))
    return kIllegalAddress;
  std::memset(DeviceMemory::Get().Host(dst), value, bytes);
  DeviceMemory::Get().SetInitialized(dst, bytes);
  return kSuccess;
}
CUresult emu_cuMemsetD8Async(CUdeviceptr dst, unsigned char value,
                             size_t bytes, void *s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != &g_stream)
    return kInvalidValue;
  if (bytes == 0)
    return kSuccess;
  if (g_capture.active)
    return Record(GraphNode::kMemset, dst, 0, bytes, value);
  return Memset(dst, value, bytes);
}
CUresult CopyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  if (!CheckCopy("cuMemcpyDtoDAsync source", src, bytes, true) ||
      !CheckCopy("cuMemcpyDtoDAsync destination", dst, bytes, false))
    return kIllegalAddress;
  DeviceMemory &m = DeviceMemory::Get();
  const uint64_t u = m.FirstUninitialized(src, bytes);
  if (u != UINT64_MAX) {
    Report("cuMemcpyDtoDAsync reads uninitialized device memory",
           {"byte " + Hex(u) + " of " + m.Describe(u, 1)});
    return kIllegalAddress;
  }
  std::memmove(m.Host(dst), m.Host(src), bytes);
  m.SetInitialized(dst, bytes);
  return kSuccess;
}
CUresult emu_cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src,
                                  size_t bytes, void *s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != &g_stream)
    return kInvalidValue;
  if (bytes == 0)
    return kSuccess;
  if (g_capture.active)
    return Record(GraphNode::kCopy, dst, src, bytes, 0);
  return CopyDtoD(dst, src, bytes);
}
CUresult emu_cuGetErrorName(CUresult r, const char **name) {
  switch (r) {
  case kSuccess: *name = "CUDA_SUCCESS"; return kSuccess;
  case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; return kSuccess;
  case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; return kSuccess;
  case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; return kSuccess;
  case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; return kSuccess;
  case kIllegalAddress: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; return kSuccess;
  case kLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; return kSuccess;
  case kInvalidHandle: *name = "CUDA_ERROR_INVALID_HANDLE"; return kSuccess;
  case kIllegalState: *name = "CUDA_ERROR_ILLEGAL_STATE"; return kSuccess;
  case kCaptureUnsupported:
    *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    return kSuccess;
  case kCaptureInvalidated:
    *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    return kSuccess;
  case kCaptureUnmatched:
    *name = "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED";
    return kSuccess;
  default: return kInvalidValue;
  }
}

//===----------------------------------------------------------------------===//
// Stream capture and graphs (the calls the runtime uses: a capture on the
// one stream becomes a chain of nodes; an instantiated graph replays them in
// order with the parameter values of the capture and the memory contents of
// the replay)
//===----------------------------------------------------------------------===//

CUresult emu_cuStreamBeginCapture_v2(void *s, int mode) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != &g_stream || mode < 0 || mode > 2)
    return kInvalidValue;
  if (g_capture.active)
    return kIllegalState;
  g_capture = Capture{true, false, mode, std::make_unique<Graph>()};
  return kSuccess;
}
CUresult emu_cuStreamEndCapture(void *s, void **graph) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != &g_stream)
    return kInvalidValue;
  if (!g_capture.active)
    return kCaptureUnmatched;
  Capture done = std::move(g_capture);
  g_capture = Capture{};
  *graph = nullptr;
  if (done.invalidated)
    return kCaptureInvalidated;
  *graph = done.graph.release();
  return kSuccess;
}
CUresult emu_cuStreamIsCapturing(void *s, int *status) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (s != &g_stream)
    return kInvalidValue;
  *status = !g_capture.active ? 0 : g_capture.invalidated ? 2 : 1;
  return kSuccess;
}
/// `nodes` null: the count only (the node handles are not used by bt).
CUresult emu_cuGraphGetNodes(void *graph, void **nodes, size_t *count) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (graph == nullptr || count == nullptr)
    return kInvalidValue;
  const auto &all = static_cast<Graph *>(graph)->nodes;
  if (nodes != nullptr)
    for (size_t i = 0; i < std::min(*count, all.size()); ++i)
      nodes[i] = const_cast<GraphNode *>(&all[i]);
  *count = all.size();
  return kSuccess;
}
CUresult emu_cuGraphInstantiateWithFlags(void **exec, void *graph,
                                         unsigned long long) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (graph == nullptr)
    return kInvalidValue;
  *exec = new Graph(*static_cast<Graph *>(graph)); // independent of `graph`
  return kSuccess;
}
CUresult emu_cuGraphLaunch(void *exec, void *s) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  if (exec == nullptr || s != &g_stream)
    return kInvalidValue;
  if (g_capture.active)
    return Unsupported(); // bt never nests graphs
  for (const GraphNode &node : static_cast<Graph *>(exec)->nodes) {
    switch (node.kind) {
    case GraphNode::kKernel: {
      std::vector<void *> params;
      for (const std::vector<char> &value : node.params)
        params.push_back(const_cast<char *>(value.data()));
      if (!RunKernel(*node.function, node.config, params.data()))
        return kLaunchFailed;
      break;
    }
    case GraphNode::kMemset:
      if (CUresult r = Memset(node.dst, node.value, node.bytes); r != kSuccess)
        return r;
      break;
    case GraphNode::kGemm:
      if (RunGemm(node.gemm) != kCublasSuccess)
        return kLaunchFailed;
      break;
    case GraphNode::kCopy:
      if (CUresult r = CopyDtoD(node.dst, node.src, node.bytes); r != kSuccess)
        return r;
      break;
    }
  }
  return kSuccess;
}
CUresult emu_cuGraphExecDestroy(void *exec) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  delete static_cast<Graph *>(exec);
  return kSuccess;
}
CUresult emu_cuGraphDestroy(void *graph) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  delete static_cast<Graph *>(graph);
  return kSuccess;
}

/// The runtime's traffic query (CudaBackend::traffic on the emulated
/// device): out[0..4] = bytes read and written in global memory (distinct
/// sectors per launch, kernels and cuBLAS operands), bytes accessed by
/// threads (read + written), GEMM FLOPs.
void bt_emu_global_traffic(int64_t *out) {
  const KernelProfile p = ProfileTotal();
  out[0] = static_cast<int64_t>(p.sector_read);
  out[1] = static_cast<int64_t>(p.sector_written);
  out[2] = static_cast<int64_t>(p.access_read + p.access_written);
  out[3] = static_cast<int64_t>(p.flops);
}

} // namespace

std::recursive_mutex &DriverMutex() { return g_mu; }

bool IsDriverStream(const void *stream) { return stream == &g_stream; }

bool CaptureGemm(const GemmCall &call) {
  if (!g_capture.active)
    return false;
  GraphNode node;
  node.kind = GraphNode::kGemm;
  node.gemm = call;
  g_capture.graph->nodes.push_back(std::move(node));
  return true;
}

void *LookupSymbol(const char *name) {
#define BT_EMU_SYMBOL(s)                                                       \
  if (std::strcmp(name, #s) == 0)                                              \
    return reinterpret_cast<void *>(&emu_##s);
  if (std::strcmp(name, "bt_emu_global_traffic") == 0)
    return reinterpret_cast<void *>(&bt_emu_global_traffic);
  BT_EMU_SYMBOL(cuInit)
  BT_EMU_SYMBOL(cuDriverGetVersion)
  BT_EMU_SYMBOL(cuDeviceGetCount)
  BT_EMU_SYMBOL(cuDeviceGet)
  BT_EMU_SYMBOL(cuDeviceGetName)
  BT_EMU_SYMBOL(cuDeviceTotalMem_v2)
  BT_EMU_SYMBOL(cuDeviceGetAttribute)
  BT_EMU_SYMBOL(cuDevicePrimaryCtxRetain)
  BT_EMU_SYMBOL(cuDevicePrimaryCtxRelease_v2)
  BT_EMU_SYMBOL(cuCtxSetCurrent)
  BT_EMU_SYMBOL(cuStreamCreate)
  BT_EMU_SYMBOL(cuStreamDestroy_v2)
  BT_EMU_SYMBOL(cuStreamSynchronize)
  BT_EMU_SYMBOL(cuModuleLoadDataEx)
  BT_EMU_SYMBOL(cuModuleUnload)
  BT_EMU_SYMBOL(cuModuleGetFunction)
  BT_EMU_SYMBOL(cuLaunchKernel)
  BT_EMU_SYMBOL(cuMemAlloc_v2)
  BT_EMU_SYMBOL(cuMemFree_v2)
  BT_EMU_SYMBOL(cuMemcpyDtoH_v2)
  BT_EMU_SYMBOL(cuMemcpyHtoD_v2)
  BT_EMU_SYMBOL(cuMemsetD8Async)
  BT_EMU_SYMBOL(cuMemcpyDtoDAsync_v2)
  BT_EMU_SYMBOL(cuGetErrorName)
  BT_EMU_SYMBOL(cuStreamBeginCapture_v2)
  BT_EMU_SYMBOL(cuStreamEndCapture)
  BT_EMU_SYMBOL(cuStreamIsCapturing)
  BT_EMU_SYMBOL(cuGraphGetNodes)
  BT_EMU_SYMBOL(cuGraphInstantiateWithFlags)
  BT_EMU_SYMBOL(cuGraphLaunch)
  BT_EMU_SYMBOL(cuGraphExecDestroy)
  BT_EMU_SYMBOL(cuGraphDestroy)
#undef BT_EMU_SYMBOL
  return LookupCublasSymbol(name);
}

} // namespace bt::cuda_emu
