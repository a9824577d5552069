//===- AbiTest.cpp - the kernel ABI of docs/abi.md ------------------------===//

#include "KernelHarness.h"

#include "bt/Codegen/CPU/CPUCodegen.h"
#include "bt/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace bt;
using namespace bt::test;

namespace {

// Parameters declared z, a, m; @f uses m then z; @g uses a.
constexpr const char *kParams = R"mlir(
  bt.param @"z" : tensor<4xf32>
  bt.param @"a" : tensor<4xf32>
  bt.param @"m" : tensor<4xf32>
  func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
    %m = bt.param_ref @"m" : tensor<4xf32>
    %z = bt.param_ref @"z" : tensor<4xf32>
    %s = arith.subf %x, %m : tensor<4xf32>
    %r = arith.mulf %s, %z : tensor<4xf32>
    return %r : tensor<4xf32>
  }
  func.func @g(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<f32>) {
    %a = bt.param_ref @"a" : tensor<4xf32>
    %r = call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
    %c = arith.constant dense<2.5> : tensor<f32>
    return %r, %c : tensor<4xf32>, tensor<f32>
  }
  func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
    %a = bt.param_ref @"a" : tensor<4xf32>
    %r = arith.addf %x, %a : tensor<4xf32>
    return %r : tensor<4xf32>
  }
)mlir";

TEST(Abi, ParamsBecomeLeadingArgumentsInDeclarationOrder) {
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      std::string("module {") + kParams + "}", &ctx);
  ASSERT_TRUE(module);
  mlir::PassManager pm(&ctx);
  pm.addPass(createBTParamsToArguments());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  auto params = [&](llvm::StringRef name) {
    std::vector<std::string> out;
    auto f = module->lookupSymbol<mlir::func::FuncOp>(name);
    if (auto attr = f->getAttrOfType<mlir::ArrayAttr>("bt.params"))
      for (mlir::Attribute a : attr)
        out.push_back(llvm::cast<mlir::StringAttr>(a).str());
    return out;
  };
  EXPECT_EQ(params("f"), (std::vector<std::string>{"z", "m"}));
  EXPECT_EQ(params("g"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(params("helper"), (std::vector<std::string>{"a"}));
  EXPECT_EQ(module->lookupSymbol<mlir::func::FuncOp>("f").getNumArguments(), 3u);
  // No bt.param is left.
  int left = 0;
  module->walk([&](mlir::Operation *op) {
    left += op->getName().getStringRef().starts_with("bt.");
  });
  EXPECT_EQ(left, 0);
}

TEST(Abi, EntryPointsVersionAndOwnership) {
  CPUPipelineOptions options;
  std::string error;
  auto k = Kernels::compile(std::string("module {") + kParams + R"mlir(
    func.func @identity(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
      return %x : tensor<?x3xf32>
    }
    func.func @slice(%x: tensor<4x6xf32>) -> tensor<4x2xf32> {
      %s = tensor.extract_slice %x[0, 3] [4, 2] [1, 1] : tensor<4x6xf32> to tensor<4x2xf32>
      return %s : tensor<4x2xf32>
    }
  })mlir", options, error);
  ASSERT_TRUE(k) << error;

  auto version = reinterpret_cast<int32_t (*)()>(k->symbol("bt_kernel_abi_version"));
  ASSERT_TRUE(version);
  EXPECT_EQ(version(), 1);
  // Only the ABI is exported.
  EXPECT_EQ(k->symbol("f"), nullptr);
  EXPECT_EQ(k->symbol("_mlir_ciface_f"), nullptr);
  EXPECT_NE(k->symbol("bt_entry_f"), nullptr);
  EXPECT_EQ(k->symbol("bt_entry_helper"), nullptr); // private

  // Params first (bt.params order z, m), then inputs.
  Array z = Array::f32({4}, {1, 2, 3, 4}), m = Array::f32({4}, {1, 1, 1, 1});
  Array x = Array::f32({4}, {5, 6, 7, 8});
  auto r = k->call("f", {&z, &m, &x}, {{1}});
  EXPECT_EQ(r[0].value.f, (std::vector<float>{4, 10, 18, 28}));

  // Two results in one result block: a memref and a scalar.
  Array a = Array::f32({4}, {0.5, 0.5, 0.5, 0.5});
  auto g = k->call("g", {&a, &x}, {{1}, {0}});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].value.f, (std::vector<float>{5.5, 6.5, 7.5, 8.5}));
  EXPECT_EQ(g[1].value.f, (std::vector<float>{2.5f}));

  // An output never aliases an argument: returning an input copies it.
  Array in = Array::f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto id = k->call("identity", {&in}, {{2}});
  EXPECT_EQ(id[0].value.f, in.f);
  EXPECT_NE(id[0].aligned, reinterpret_cast<uintptr_t>(in.data()));
  EXPECT_EQ(id[0].value.shape, in.shape);

  // A strided view is returned as a dense, owned copy.
  Array big = Array::f32({4, 6}, {});
  for (int i = 0; i < 24; ++i)
    big.f.push_back(static_cast<float>(i));
  auto s = k->call("slice", {&big}, {{2}});
  EXPECT_EQ(s[0].value.f, (std::vector<float>{3, 4, 9, 10, 15, 16, 21, 22}));
  EXPECT_EQ(s[0].offset, 0);
  EXPECT_EQ(s[0].strides, (std::vector<int64_t>{2, 1}));
}

TEST(Abi, SharedObjectLinksOnlyGlibc) {
  CPUPipelineOptions options;
  std::string error;
  auto k = Kernels::compile(R"mlir(
    func.func @mm(%x: tensor<?x64xf32>, %w: tensor<64x64xf32>) -> tensor<?x64xf32> {
      %y = bt.linear %x, %w : tensor<?x64xf32>, tensor<64x64xf32> -> tensor<?x64xf32>
      %g = bt.gelu %y : tensor<?x64xf32>
      return %g : tensor<?x64xf32>
    })mlir", options, error);
  ASSERT_TRUE(k) << error;
  const std::string &so = k->sharedObject();
  ASSERT_GT(so.size(), 4u);
  EXPECT_EQ(so.substr(0, 4), "\x7f" "ELF");
  // DT_NEEDED entries are in .dynstr (libmvec.so.1 may join them); BLAS
  // stays undefined (no libopenblas).
  EXPECT_NE(so.find("libm.so.6"), std::string::npos);
  EXPECT_NE(so.find("libc.so.6"), std::string::npos);
  EXPECT_NE(so.find("cblas_sgemm"), std::string::npos);
  EXPECT_EQ(so.find("libopenblas"), std::string::npos);
  EXPECT_EQ(so.find("memrefCopy"), std::string::npos);
}

TEST(Abi, CompileErrorsCarryTheLinkerOutput) {
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(
      "module { llvm.func @f() { llvm.return } }", &ctx);
  ASSERT_TRUE(module);
  CPUCodegenOptions opts;
  opts.linker = "/bin/false";
  llvm::Expected<std::string> so = compileToSharedObject(*module, opts);
  ASSERT_FALSE(static_cast<bool>(so));
  std::string msg = llvm::toString(so.takeError());
  EXPECT_NE(msg.find("linking the kernel library failed"), std::string::npos) << msg;

  opts.linker = "";
  opts.cpu = "x86-64-v3";
  llvm::Expected<std::string> ok = compileToSharedObject(*module, opts);
  EXPECT_TRUE(static_cast<bool>(ok)) << llvm::toString(ok.takeError());
}

} // namespace

namespace {

// runCPUPipeline honors the MLIR PassManager command-line options once a
// tool registered them (what bt-run does for --mlir-timing & co.).
TEST(CPUPipeline, HonorsPassManagerCommandLineOptions) {
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  const char *argv[] = {"bt-codegen-tests", "--mlir-timing"};
  ASSERT_TRUE(llvm::cl::ParseCommandLineOptions(2, argv, "", &llvm::errs()));
  mlir::DialectRegistry registry;
  registerCPUCodegenDialects(registry);
  mlir::MLIRContext ctx(registry);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @g(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %y = bt.gelu %x : tensor<4x8xf32>
      return %y : tensor<4x8xf32>
    })mlir", &ctx);
  ASSERT_TRUE(module);
  ::testing::internal::CaptureStderr();
  mlir::LogicalResult result = runCPUPipeline(*module);
  std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(mlir::succeeded(result));
  EXPECT_NE(err.find("Execution time report"), std::string::npos) << err;
  EXPECT_NE(err.find("BTLowerToLinalg"), std::string::npos);
}

} // namespace
