//===- CudaHostTest.cpp - the CUDA target's host code without a GPU -------===//
//
// Compiles examples/block_tiny.mlir (all entry points) with bt-cuda-pipeline,
// loads the host shared object and runs `eval` and `decode_block` against a
// fake GPU ABI defined here on host memory (docs/abi.md, "Kernel library
// (CUDA target)"). Kernels do not run (their results are not checked); what
// is checked is the host side that a GPU would see:
//   - every launch names a kernel of the PTX module and passes exactly as
//     many parameters as the kernel declares (host packing and NVVM kernel
//     signature agree), with valid grid/block sizes and shared memory;
//   - every GEMM, device-to-host copy and free touches only live buffers
//     (arguments or allocations), and every GEMM's leading dimensions are
//     valid for cblas semantics;
//   - no allocation leaks: after a call only the outputs are live.
//
//===----------------------------------------------------------------------===//

#include "KernelHarness.h"

#include "bt/Codegen/Passes.h"
#include "bt/Codegen/CUDA/CUDACodegen.h"
#include "bt/Dialect/BT/IR/BTDialect.h"
#include "bt/Dialect/BT/IR/BTOps.h"
#include "bt/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>

using namespace bt::test;

namespace {

/// The fake GPU: allocations on the host, the calls the host code makes.
struct FakeGpu {
  std::map<uintptr_t, uint64_t> live;     // allocation → bytes
  std::map<uintptr_t, uint64_t> buffers;  // argument buffers → bytes
  std::map<std::string, int> kernelParams; // PTX entry → parameter count
  std::vector<std::string> errors;
  int64_t launches = 0, gemms = 0, copies = 0, allocs = 0, frees = 0;

  /// Whether [p, p + bytes) lies in a live allocation or an argument.
  bool valid(uintptr_t p, uint64_t bytes) const {
    for (const auto *m : {&live, &buffers}) {
      auto it = m->upper_bound(p);
      if (it == m->begin())
        continue;
      --it;
      if (p >= it->first && p + bytes <= it->first + it->second)
        return true;
    }
    return false;
  }
  void error(const std::string &e) {
    if (errors.size() < 20)
      errors.push_back(e);
  }
};
FakeGpu *g_gpu = nullptr;

/// Parameter count of every `.entry` of a PTX module.
std::map<std::string, int> kernelParamCounts(const std::string &ptx) {
  std::map<std::string, int> out;
  std::regex entry(R"(\.visible \.entry ([A-Za-z0-9_]+)\()");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), entry);
       it != std::sregex_iterator(); ++it) {
    size_t start = it->position(0) + it->length(0);
    size_t end = ptx.find(')', start);
    std::string params = ptx.substr(start, end - start);
    int n = 0;
    for (size_t p = params.find(".param"); p != std::string::npos;
         p = params.find(".param", p + 1))
      ++n;
    out[(*it)[1]] = n;
  }
  return out;
}

} // namespace

// The GPU ABI, resolved by the host shared object against this executable
// (ENABLE_EXPORTS).
extern "C" {
void *bt_gpu_alloc(int64_t bytes) {
  void *p = std::aligned_alloc(256, std::max<int64_t>((bytes + 255) / 256 * 256, 256));
  if (g_gpu) {
    g_gpu->live[reinterpret_cast<uintptr_t>(p)] = static_cast<uint64_t>(bytes);
    ++g_gpu->allocs;
  }
  return p;
}
void bt_gpu_free(void *p) {
  if (p == nullptr)
    return;
  if (g_gpu) {
    ++g_gpu->frees;
    if (!g_gpu->live.erase(reinterpret_cast<uintptr_t>(p)))
      g_gpu->error("bt_gpu_free of a pointer that is not a live allocation");
  }
  std::free(p);
}
void bt_gpu_launch(const char *name, int64_t gx, int64_t gy, int64_t gz,
                   int64_t bx, int64_t by, int64_t bz, int32_t smem,
                   void **params, int32_t n) {
  if (!g_gpu)
    return;
  ++g_gpu->launches;
  auto it = g_gpu->kernelParams.find(name);
  if (it == g_gpu->kernelParams.end()) {
    g_gpu->error(std::string("launch of '") + name + "', not in the PTX module");
    return;
  }
  if (it->second != n)
    g_gpu->error(std::string("launch of '") + name + "' with " +
                 std::to_string(n) + " parameters, the kernel declares " +
                 std::to_string(it->second));
  for (int i = 0; i < n; ++i)
    if (params[i] == nullptr)
      g_gpu->error(std::string("launch of '") + name + "': null parameter");
  if (gx < 1 || gy < 1 || gy > 65535 || gz < 1 || gz > 65535 || bx < 1 ||
      by < 1 || bz < 1 || bx * by * bz > 1024 || smem < 0 || smem > 48 * 1024)
    g_gpu->error(std::string("launch of '") + name + "': bad grid/block/smem");
}
void bt_gpu_sgemm(int32_t order, int32_t ta, int32_t tb, int32_t m, int32_t n,
                  int32_t k, float alpha, const float *a, int32_t lda,
                  const float *b, int32_t ldb, float beta, float *c,
                  int32_t ldc) {
  if (!g_gpu)
    return;
  ++g_gpu->gemms;
  bool transA = ta == 112, transB = tb == 112;
  int32_t aRows = transA ? k : m, aCols = transA ? m : k;
  int32_t bRows = transB ? n : k, bCols = transB ? k : n;
  if (order != 101 || (ta != 111 && ta != 112) || (tb != 111 && tb != 112) ||
      lda < std::max(aCols, 1) || ldb < std::max(bCols, 1) ||
      ldc < std::max(n, 1)) {
    g_gpu->error("bt_gpu_sgemm: bad order/transpose/leading dimension");
    return;
  }
  auto extent = [](int32_t rows, int32_t cols, int32_t ld) -> uint64_t {
    return rows == 0 || cols == 0
               ? 0
               : (static_cast<uint64_t>(rows - 1) * ld + cols) * 4;
  };
  if (!g_gpu->valid(reinterpret_cast<uintptr_t>(a), extent(aRows, aCols, lda)) ||
      !g_gpu->valid(reinterpret_cast<uintptr_t>(b), extent(bRows, bCols, ldb)) ||
      !g_gpu->valid(reinterpret_cast<uintptr_t>(c), extent(m, n, ldc))) {
    g_gpu->error("bt_gpu_sgemm: an operand outside the live buffers");
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b,
              ldb, beta, c, ldc);
}
void bt_gpu_memcpy_dtoh(void *dst, const void *src, int64_t bytes) {
  if (!g_gpu)
    return;
  ++g_gpu->copies;
  if (!g_gpu->valid(reinterpret_cast<uintptr_t>(src), bytes))
    g_gpu->error("bt_gpu_memcpy_dtoh from outside the live buffers");
  else
    std::memcpy(dst, src, bytes);
}
}

namespace {

struct CompiledExample {
  std::unique_ptr<Kernels> kernels;
  std::string ptx;
  std::map<std::string, std::vector<int64_t>> paramShapes;
  std::map<std::string, std::vector<mlir::RankedTensorType>> inputTypes;
};

/// examples/block_tiny.mlir → bt-generate-entry-points → bt-decompose →
/// bt-cuda-pipeline (its @generate skeleton is not an entry point).
CompiledExample *getExample(std::string &error) {
  static std::unique_ptr<CompiledExample> cached;
  if (cached)
    return cached.get();
  mlir::DialectRegistry registry;
  bt::registerCUDACodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(BT_EXAMPLES_DIR "/block_tiny.mlir",
                                            &ctx);
  if (!module) {
    error = "cannot parse examples/block_tiny.mlir";
    return nullptr;
  }
  if (auto gen = module->lookupSymbol<mlir::func::FuncOp>("generate"))
    gen.erase();
  mlir::PassManager pm(&ctx);
  pm.addPass(bt::createBTGenerateEntryPoints());
  pm.addPass(bt::createBTDecompose());
  pm.addPass(bt::createBTLowerKVCaches({}, &bt::getCUDACodegenTarget()));
  if (mlir::failed(pm.run(*module))) {
    error = "bt-generate-entry-points / bt-decompose / bt-lower-kv-caches failed";
    return nullptr;
  }
  auto c = std::make_unique<CompiledExample>();
  for (auto param : module->getOps<bt::ParamOp>()) {
    auto type = llvm::cast<mlir::RankedTensorType>(param.getType());
    c->paramShapes[param.getSymName().str()] = std::vector<int64_t>(
        type.getShape().begin(), type.getShape().end());
  }
  for (auto fn : module->getOps<mlir::func::FuncOp>())
    for (mlir::Type t : fn.getArgumentTypes())
      c->inputTypes[fn.getSymName().str()].push_back(
          llvm::cast<mlir::RankedTensorType>(t));
  bt::CUDAPipelineOptions options;
  c->kernels = Kernels::compileCUDAModule(*module, options, c->ptx, error);
  if (!c->kernels)
    return nullptr;
  cached = std::move(c);
  return cached.get();
}

/// Runs `entry` with random weights and the given inputs on the fake GPU;
/// returns the fake's record.
FakeGpu run(CompiledExample &c, const std::string &entry,
            const std::vector<const Array *> &inputs,
            const std::vector<ResultSpec> &results) {
  FakeGpu gpu;
  gpu.kernelParams = kernelParamCounts(c.ptx);
  std::mt19937 rng(7);
  std::vector<Array> weights;
  std::vector<std::string> names = c.kernels->params(entry);
  weights.reserve(names.size());
  for (const std::string &n : names)
    weights.push_back(Array::random(c.paramShapes.at(n), rng, -0.1f, 0.1f));
  std::vector<const Array *> args;
  for (const Array &w : weights)
    args.push_back(&w);
  args.insert(args.end(), inputs.begin(), inputs.end());
  for (const Array *a : args) {
    uint64_t esz = a->dtype == DType::F32 || a->dtype == DType::I32 ? 4
                   : a->dtype == DType::I1                          ? 1
                                                                    : 8;
    gpu.buffers[reinterpret_cast<uintptr_t>(a->data())] =
        std::max<uint64_t>(a->numel() * esz, 1);
  }
  g_gpu = &gpu;
  std::vector<Result> out = c.kernels->call(entry, args, results);
  // The harness frees the outputs after copying them; they must be exactly
  // the allocations still live.
  g_gpu = nullptr;
  EXPECT_EQ(out.size(), results.size());
  return gpu;
}

TEST(CudaHost, EvalAgainstAFakeGpu) {
  std::string error;
  CompiledExample *c = getExample(error);
  ASSERT_TRUE(c) << error;
  EXPECT_GT(c->kernels->params("eval").size(), 10u);
  // eval(input_ids, attention_mask, block_attention_mask, ...): valid ids
  // and all-ones masks (the example's static [2, 6, 4] / [2, 5, 4] shapes).
  std::vector<Array> inputs;
  for (mlir::RankedTensorType t : c->inputTypes.at("eval")) {
    std::vector<int64_t> shape(t.getShape().begin(), t.getShape().end());
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    inputs.push_back(Array::i64(shape, std::vector<int64_t>(n, 1)));
  }
  std::vector<const Array *> in;
  for (const Array &a : inputs)
    in.push_back(&a);
  FakeGpu gpu = run(*c, "eval", in, {{4}, {0}});
  for (const std::string &e : gpu.errors)
    ADD_FAILURE() << e;
  EXPECT_GT(gpu.launches, 20);
  EXPECT_GT(gpu.gemms, 0);
  // Two outputs (logits, loss) stay live; everything else was freed.
  EXPECT_EQ(gpu.live.size(), 2u);
  EXPECT_EQ(gpu.allocs - gpu.frees, 2);
}

TEST(CudaHost, DecodeBlockAgainstAFakeGpu) {
  std::string error;
  CompiledExample *c = getExample(error);
  ASSERT_TRUE(c) << error;
  // decode_block(input_ids [B, 1, L_B], kv_cache [B, 2, 2, 2, C, 32],
  // kv_valid [B, C], cache_length []) with 3 blocks already in the cache.
  const int64_t b = 2, capacity = 8;
  Array ids = Array::i64({b, 1, 4}, std::vector<int64_t>(b * 4, 5));
  Array kv = Array::f32({b, 2, 2, 2, capacity, 32},
                        std::vector<float>(b * 2 * 2 * 2 * capacity * 32, 0.5f));
  Array valid = Array::i64({b, capacity}, std::vector<int64_t>(b * capacity, 1));
  Array length = Array::i64({}, {3});
  FakeGpu gpu = run(*c, "decode_block", {&ids, &kv, &valid, &length}, {{2}});
  for (const std::string &e : gpu.errors)
    ADD_FAILURE() << e;
  // The fill length steers the host; it is passed by value (bt.host_scalar,
  // bt-scalars-to-kernels), so the host code reads it in place: no
  // device->host copy.
  EXPECT_EQ(gpu.copies, 0);
  EXPECT_GT(gpu.launches, 10);
  EXPECT_EQ(gpu.live.size(), 1u); // the context output
}

TEST(CudaHost, PtxHasTheAttentionKernels) {
  std::string error;
  CompiledExample *c = getExample(error);
  ASSERT_TRUE(c) << error;
  std::map<std::string, int> kernels = kernelParamCounts(c->ptx);
  EXPECT_GT(kernels.size(), 100u);
  // Split-K decode uses dynamic shared memory and warp shuffles.
  EXPECT_NE(c->ptx.find("shfl.sync.bfly"), std::string::npos);
  EXPECT_NE(c->ptx.find("shfl.sync.idx"), std::string::npos);
  EXPECT_NE(c->ptx.find("bar.sync"), std::string::npos);
}

} // namespace
