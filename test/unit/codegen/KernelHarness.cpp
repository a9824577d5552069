//===- KernelHarness.cpp - compile bt IR and call it through the kernel ABI ===//

#include "KernelHarness.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/CUDA/CUDACodegen.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <sstream>
#include <sys/mman.h>
#include <unistd.h>

using namespace bt::test;

int64_t Array::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

void *Array::data() const {
  switch (dtype) {
  case DType::F32:
    return const_cast<float *>(f.data());
  case DType::I64:
    return const_cast<int64_t *>(i.data());
  case DType::I32:
    i32.assign(i.begin(), i.end());
    return i32.data();
  case DType::I1:
    i1.assign(i.begin(), i.end());
    return i1.data();
  }
  return nullptr;
}

Array Array::f32(std::vector<int64_t> shape, std::vector<float> values) {
  Array a;
  a.dtype = DType::F32;
  a.shape = std::move(shape);
  a.f = std::move(values);
  return a;
}

Array Array::i64(std::vector<int64_t> shape, std::vector<int64_t> values) {
  Array a;
  a.dtype = DType::I64;
  a.shape = std::move(shape);
  a.i = std::move(values);
  return a;
}

Array Array::i32v(std::vector<int64_t> shape, std::vector<int64_t> values) {
  Array a = i64(std::move(shape), std::move(values));
  a.dtype = DType::I32;
  return a;
}

Array Array::i1v(std::vector<int64_t> shape, std::vector<int64_t> values) {
  Array a = i64(std::move(shape), std::move(values));
  a.dtype = DType::I1;
  return a;
}

Array Array::random(std::vector<int64_t> shape, std::mt19937 &rng, float lo,
                    float hi) {
  Array a;
  a.shape = std::move(shape);
  std::uniform_real_distribution<float> dist(lo, hi);
  a.f.resize(a.numel());
  for (float &v : a.f)
    v = dist(rng);
  return a;
}

Kernels::~Kernels() {
  if (handle)
    dlclose(handle);
  if (fd >= 0)
    close(fd);
}

std::unique_ptr<Kernels> Kernels::compile(const std::string &source,
                                          const CPUPipelineOptions &options,
                                          std::string &error) {
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    diagOS << d.getLocation() << ": " << d << "\n";
    for (mlir::Diagnostic &note : d.getNotes())
      diagOS << "  note: " << note << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, &ctx);
  if (!module) {
    error = "parse error:\n" + diagOS.str();
    return nullptr;
  }
  return compileModule(*module, options, error);
}

std::unique_ptr<Kernels> Kernels::compileModule(mlir::ModuleOp module,
                                                const CPUPipelineOptions &options,
                                                std::string &error) {
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  mlir::ScopedDiagnosticHandler handler(module->getContext(), [&](mlir::Diagnostic &d) {
    diagOS << d.getLocation() << ": " << d << "\n";
    for (mlir::Diagnostic &note : d.getNotes())
      diagOS << "  note: " << note << "\n";
    return mlir::success();
  });
  if (mlir::failed(runCPUPipeline(module, options))) {
    error = "bt-cpu-pipeline failed:\n" + diagOS.str();
    return nullptr;
  }
  return loadLowered(module, error);
}

std::unique_ptr<Kernels> Kernels::compileCUDAModule(
    mlir::ModuleOp module, const CUDAPipelineOptions &options, std::string &ptx,
    std::string &error, std::string *emulatorImage) {
  std::string diagnostics;
  llvm::raw_string_ostream diagOS(diagnostics);
  mlir::ScopedDiagnosticHandler handler(module->getContext(), [&](mlir::Diagnostic &d) {
    diagOS << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> emulatorKernels;
  if (mlir::failed(runCUDAPipeline(module, options,
                                   emulatorImage ? &emulatorKernels : nullptr))) {
    error = "bt-cuda-pipeline failed:\n" + diagOS.str();
    return nullptr;
  }
  if (emulatorImage) {
    llvm::Expected<std::string> so =
        compileToSharedObject(*emulatorKernels, {});
    if (!so) {
      error = "the emulator's kernels: " + llvm::toString(so.takeError());
      return nullptr;
    }
    *emulatorImage = std::move(*so);
  }
  mlir::FailureOr<std::string> text = takePTX(module);
  if (mlir::failed(text)) {
    error = "takePTX failed:\n" + diagOS.str();
    return nullptr;
  }
  ptx = std::move(*text);
  return loadLowered(module, error);
}

std::unique_ptr<Kernels> Kernels::loadLowered(mlir::ModuleOp module,
                                              std::string &error) {
  llvm::Expected<std::string> so = compileToSharedObject(module, {});
  if (!so) {
    error = llvm::toString(so.takeError());
    return nullptr;
  }
  auto k = std::unique_ptr<Kernels>(new Kernels());
  module.walk([&](mlir::LLVM::LLVMFuncOp f) {
    if (f.getName().starts_with("_mlir_ciface_")) {
      std::vector<bool> flags;
      for (unsigned i = 0; i < f.getNumArguments(); ++i)
        flags.push_back(static_cast<bool>(f.getArgAttr(i, "bt.host_scalar")));
      k->hostScalars.push_back(
          {f.getName().drop_front(strlen("_mlir_ciface_")).str(), flags});
    }
    auto attr = f->getAttrOfType<mlir::ArrayAttr>("bt.params");
    if (!attr || f.getName().starts_with("_mlir_ciface_"))
      return;
    std::vector<std::string> names;
    for (mlir::Attribute a : attr)
      names.push_back(llvm::cast<mlir::StringAttr>(a).str());
    k->paramOrder.push_back({f.getName().str(), names});
  });
  k->so = std::move(*so);
  // For profiling (perf cannot symbolize a memfd): BT_TEST_SO_DIR=dir
  // writes the library there and loads it from that file.
  if (const char *dir = std::getenv("BT_TEST_SO_DIR")) {
    static int counter = 0;
    std::string path = std::string(dir) + "/bt-kernels-" +
                       std::to_string(getpid()) + "-" +
                       std::to_string(counter++) + ".so";
    FILE *f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(k->so.data(), 1, k->so.size(), f) != k->so.size()) {
      error = "cannot write " + path;
      return nullptr;
    }
    std::fclose(f);
    k->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!k->handle) {
      error = std::string("dlopen failed: ") + dlerror();
      return nullptr;
    }
    return k;
  }
  // Load from memory like the runtime (docs/abi.md).
  k->fd = memfd_create("bt-kernels", MFD_CLOEXEC);
  if (k->fd < 0 ||
      write(k->fd, k->so.data(), k->so.size()) !=
          static_cast<ssize_t>(k->so.size())) {
    error = "memfd_create/write failed";
    return nullptr;
  }
  std::string path = "/proc/self/fd/" + std::to_string(k->fd);
  k->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!k->handle) {
    error = std::string("dlopen failed: ") + dlerror();
    return nullptr;
  }
  return k;
}

void *Kernels::symbol(const std::string &name) const {
  return dlsym(handle, name.c_str());
}

std::vector<std::string> Kernels::params(const std::string &name) const {
  for (const auto &[fn, names] : paramOrder)
    if (fn == name)
      return names;
  return {};
}

bool bt::test::loadSafetensors(const std::string &path,
                               std::vector<std::pair<std::string, Array>> &out,
                               std::string &error) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf) {
    error = "cannot read " + path;
    return false;
  }
  llvm::StringRef bytes = (*buf)->getBuffer();
  if (bytes.size() < 8) {
    error = "truncated " + path;
    return false;
  }
  uint64_t headerSize;
  std::memcpy(&headerSize, bytes.data(), 8);
  if (8 + headerSize > bytes.size()) {
    error = "bad header size in " + path;
    return false;
  }
  llvm::Expected<llvm::json::Value> header =
      llvm::json::parse(bytes.substr(8, headerSize));
  if (!header) {
    error = llvm::toString(header.takeError());
    return false;
  }
  llvm::StringRef data = bytes.drop_front(8 + headerSize);
  for (const auto &[key, value] : *header->getAsObject()) {
    if (key == "__metadata__")
      continue;
    const llvm::json::Object *t = value.getAsObject();
    std::optional<llvm::StringRef> dtype = t->getString("dtype");
    const llvm::json::Array *shape = t->getArray("shape");
    const llvm::json::Array *offsets = t->getArray("data_offsets");
    if (!dtype || !shape || !offsets || offsets->size() != 2) {
      error = "bad entry " + key.str();
      return false;
    }
    Array a;
    for (const llvm::json::Value &d : *shape)
      a.shape.push_back(*d.getAsInteger());
    int64_t begin = *(*offsets)[0].getAsInteger(), end = *(*offsets)[1].getAsInteger();
    llvm::StringRef raw = data.slice(begin, end);
    if (*dtype == "F32") {
      a.dtype = DType::F32;
      a.f.resize(raw.size() / 4);
      std::memcpy(a.f.data(), raw.data(), raw.size());
    } else if (*dtype == "I64") {
      a.dtype = DType::I64;
      a.i.resize(raw.size() / 8);
      std::memcpy(a.i.data(), raw.data(), raw.size());
    } else {
      error = "unsupported dtype " + dtype->str();
      return false;
    }
    out.push_back({key.str(), std::move(a)});
  }
  return true;
}

static size_t elementSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  case DType::I1:
    return 1;
  }
  return 0;
}

std::vector<Result> Kernels::call(const std::string &name,
                                  const std::vector<const Array *> &args,
                                  const std::vector<ResultSpec> &results,
                                  const DeviceMemory *device) const {
  auto entry = reinterpret_cast<void (*)(void **)>(symbol("bt_entry_" + name));
  if (!entry)
    return {};
  // Result block: consecutive descriptors of 3 + 2r words.
  size_t words = 0;
  for (const ResultSpec &r : results)
    words += 3 + 2 * r.rank;
  std::vector<int64_t> block(words + 1, 0);
  std::vector<std::vector<int64_t>> descs;
  std::vector<void *> argv;
  if (!results.empty())
    argv.push_back(block.data());
  std::vector<void *> uploaded;
  // The C interface's arguments end with ours (a result pointer may come
  // first): a scalar passed by value stays in host memory.
  std::vector<bool> byValue(args.size(), false);
  for (const auto &[fn, flags] : hostScalars)
    if (fn == name && flags.size() >= args.size())
      for (size_t j = 0; j < args.size(); ++j)
        byValue[j] = flags[flags.size() - args.size() + j];
  for (size_t j = 0; j < args.size(); ++j) {
    const Array *a = args[j];
    std::vector<int64_t> d(3 + 2 * a->shape.size());
    void *data = a->data();
    if (device && !byValue[j]) {
      int64_t bytes = a->numel() * static_cast<int64_t>(elementSize(a->dtype));
      data = bytes > 0 ? device->upload(data, bytes) : nullptr;
      uploaded.push_back(data);
    }
    d[0] = d[1] = static_cast<int64_t>(reinterpret_cast<intptr_t>(data));
    d[2] = 0;
    int64_t stride = 1;
    size_t r = a->shape.size();
    for (size_t i = r; i-- > 0;) {
      d[3 + i] = a->shape[i];
      d[3 + r + i] = stride;
      stride *= a->shape[i];
    }
    descs.push_back(std::move(d));
  }
  for (auto &d : descs)
    argv.push_back(d.data());
  if (device && device->invoke)
    device->invoke(entry, argv.data());
  else
    entry(argv.data());
  if (device)
    for (void *p : uploaded)
      if (p)
        device->release(p);

  std::vector<Result> out;
  size_t pos = 0;
  for (const ResultSpec &spec : results) {
    const int64_t *d = block.data() + pos;
    pos += 3 + 2 * spec.rank;
    Result res;
    res.allocated = static_cast<uintptr_t>(d[0]);
    res.aligned = static_cast<uintptr_t>(d[1]);
    res.offset = d[2];
    res.value.dtype = spec.dtype;
    res.value.shape.assign(d + 3, d + 3 + spec.rank);
    res.strides.assign(d + 3 + spec.rank, d + 3 + 2 * spec.rank);
    int64_t n = res.value.numel();
    if (spec.dtype == DType::F32)
      res.value.f.resize(n);
    else
      res.value.i.resize(n);
    const char *base = reinterpret_cast<const char *>(res.aligned);
    size_t esz = elementSize(spec.dtype);
    // On a device: a host copy of the elements' span [aligned, last + 1).
    std::vector<char> hostCopy;
    if (device && n > 0) {
      int64_t last = res.offset;
      for (size_t i = 0; i < spec.rank; ++i)
        last += (res.value.shape[i] - 1) * res.strides[i];
      hostCopy.resize((last + 1) * esz);
      device->download(hostCopy.data(), base, hostCopy.size());
      base = hostCopy.data();
    }
    for (int64_t lin = 0; lin < n; ++lin) {
      int64_t rem = lin, off = res.offset;
      for (size_t i = spec.rank; i-- > 0;) {
        off += (rem % res.value.shape[i]) * res.strides[i];
        rem /= res.value.shape[i];
      }
      const char *p = base + off * esz;
      if (spec.dtype == DType::F32)
        std::memcpy(&res.value.f[lin], p, 4);
      else if (spec.dtype == DType::I64)
        std::memcpy(&res.value.i[lin], p, 8);
      else if (spec.dtype == DType::I32) {
        int32_t v;
        std::memcpy(&v, p, 4);
        res.value.i[lin] = v;
      } else {
        res.value.i[lin] = *reinterpret_cast<const uint8_t *>(p);
      }
    }
    if (!device)
      std::free(reinterpret_cast<void *>(res.allocated));
    else if (!device->invoke)
      device->release(reinterpret_cast<void *>(res.allocated));
    out.push_back(std::move(res));
  }
  return out;
}

std::string bt::test::compareClose(const std::vector<float> &actual,
                                   const std::vector<double> &expected,
                                   double rtol, double atol) {
  std::ostringstream os;
  if (actual.size() != expected.size()) {
    os << "size mismatch: " << actual.size() << " vs " << expected.size();
    return os.str();
  }
  int reported = 0;
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double a = actual[i], e = expected[i];
    bool ok = (std::isnan(a) && std::isnan(e)) ||
              std::fabs(a - e) <= atol + rtol * std::fabs(e);
    if (ok)
      continue;
    ++bad;
    worst = std::max(worst, std::fabs(a - e));
    if (reported++ < 8)
      os << "  [" << i << "] got " << a << ", expected " << e << "\n";
  }
  if (!bad)
    return "";
  std::ostringstream head;
  head << bad << " of " << actual.size()
       << " elements differ (max abs diff " << worst << "):\n";
  return head.str() + os.str();
}
