//===- EmuCompare.cpp - one module on both targets, results compared ------===//
//
// See EmuCompare.h.
//
//===----------------------------------------------------------------------===//

#include "EmuCompare.h"
#include "EmuDevice.h"

#include "bt/Codegen/CUDA/CUDACodegen.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace bt::test {
namespace {

const DeviceMemory kEmuMemory = {&emu::upload, &emu::download, &emu::release};

/// The emulator's currently loaded module image (one at a time).
const std::string *g_loaded = nullptr;

/// Bit-identical results (f32 compared as bits: NaN = NaN, -0 ≠ +0).
bool sameBits(const Array &a, const Array &b) {
  if (a.shape != b.shape || a.i != b.i || a.f.size() != b.f.size())
    return false;
  return a.f.empty() ||
         std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)) == 0;
}

} // namespace

std::unique_ptr<mlir::MLIRContext> makeCUDAContext() {
  mlir::DialectRegistry registry;
  registerCUDACodegenDialects(registry);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry);
  ctx->loadAllAvailableDialects();
  return ctx;
}

std::unique_ptr<BothTargets> compileBoth(const std::string &source,
                                         std::string &error) {
  auto both = std::make_unique<BothTargets>();
  both->cpu = Kernels::compile(source, CPUPipelineOptions(), error);
  if (!both->cpu) {
    error = "CPU target: " + error;
    return nullptr;
  }
  std::unique_ptr<mlir::MLIRContext> ctx = makeCUDAContext();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(source, ctx.get());
  if (!module) {
    error = "CUDA target: cannot parse the module";
    return nullptr;
  }
  std::string ptx;
  both->gpu = Kernels::compileCUDAModule(*module, CUDAPipelineOptions(), ptx,
                                         error, &both->emulatorImage);
  if (!both->gpu) {
    error = "CUDA target: " + error;
    return nullptr;
  }
  if (!emu::open(error))
    return nullptr;
  return both;
}

void expectSame(BothTargets &both, const std::string &name,
                const std::vector<const Array *> &args,
                const std::vector<ResultSpec> &results, const std::string &what,
                const CompareOptions &options) {
  SCOPED_TRACE(name + " " + what);
  std::vector<Result> cpu = both.cpu->call(name, args, results);
  if (g_loaded != &both.emulatorImage) {
    std::string error;
    ASSERT_TRUE(emu::loadModule(both.emulatorImage, error)) << error;
    g_loaded = &both.emulatorImage;
  }
  long before = emu::reports();
  emu::setScheduleSeed(0);
  std::vector<Result> gpu = both.gpu->call(name, args, results, &kEmuMemory);
  EXPECT_EQ(emu::reports(), before) << "the emulator reported";
  ASSERT_EQ(cpu.size(), results.size());
  ASSERT_EQ(gpu.size(), results.size());
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(gpu[r].value.shape, cpu[r].value.shape) << "result " << r;
    if (results[r].dtype != DType::F32) {
      EXPECT_EQ(gpu[r].value.i, cpu[r].value.i) << "result " << r;
      continue;
    }
    std::vector<double> expected(cpu[r].value.f.begin(), cpu[r].value.f.end());
    std::string msg =
        compareClose(gpu[r].value.f, expected, options.tol, options.tol);
    EXPECT_TRUE(msg.empty()) << "result " << r << ": " << msg;
    // Every case has finite results (fully masked attention rows: HF's
    // mean over the MIN-score keys), which NaN = NaN above would not see.
    for (float v : gpu[r].value.f)
      if (!std::isfinite(v)) {
        ADD_FAILURE() << "result " << r << ": a non-finite element";
        break;
      }
  }
  for (unsigned long long seed : options.seeds) {
    emu::setScheduleSeed(seed);
    std::vector<Result> again =
        both.gpu->call(name, args, results, &kEmuMemory);
    EXPECT_EQ(emu::reports(), before) << "the emulator reported, seed " << seed;
    ASSERT_EQ(again.size(), gpu.size());
    for (size_t r = 0; r < gpu.size(); ++r)
      EXPECT_TRUE(sameBits(again[r].value, gpu[r].value))
          << "result " << r << " with schedule seed " << seed
          << " differs from the in-order run";
  }
  emu::setScheduleSeed(0);
}

std::vector<int64_t> keyFlags(int64_t batch, int64_t keys, std::mt19937 &rng) {
  std::bernoulli_distribution valid(0.8);
  std::vector<int64_t> f(batch * keys);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < keys; ++t)
      f[b * keys + t] = b % 3 == 0 ? (t >= 3 && valid(rng)) : b % 3 == 2;
  return f;
}

Array randomIds(std::vector<int64_t> shape, int64_t vocab, bool i32,
                std::mt19937 &rng) {
  Array a = Array::i64(shape, {});
  std::uniform_int_distribution<int64_t> d(0, vocab - 1);
  a.i.resize(a.numel());
  for (int64_t &v : a.i)
    v = d(rng);
  if (i32)
    a.dtype = DType::I32;
  return a;
}

} // namespace bt::test
