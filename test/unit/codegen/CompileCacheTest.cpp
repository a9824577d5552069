//===- CompileCacheTest.cpp - bt/Codegen/CompileCache.h -------------------===//
//
// The compile cache's contract: a stored payload is read back under the same
// key only; keys depend on every field, its name, and the module's text
// (locations included); a damaged entry is a miss; a store replaces it; an
// unusable directory is an error of open/store, never a crash.
//
//===----------------------------------------------------------------------===//

#include "bt/Codegen/CompileCache.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace bt::codegen;

namespace {

class CompileCacheTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(
        llvm::sys::fs::createUniqueDirectory("bt-compile-cache-test", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }
  std::string path(llvm::StringRef name) const {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
  llvm::SmallString<256> dir;
};

CompileCacheKey key(llvm::StringRef value, llvm::StringRef kind = "so") {
  CompileCacheKey k(kind, "build-id test");
  k.add("cpu", value);
  return k;
}

TEST(CompileCacheKeyTest, EveryFieldNameAndValueCounts) {
  EXPECT_EQ(key("znver3").hex(), key("znver3").hex());
  EXPECT_EQ(key("znver3").hex().size(), 64u);
  EXPECT_NE(key("znver3").hex(), key("znver4").hex());
  EXPECT_NE(key("znver3").hex(), key("znver3", "ptx").hex());
  CompileCacheKey otherBuild("so", "build-id other");
  otherBuild.add("cpu", "znver3");
  EXPECT_NE(key("znver3").hex(), otherBuild.hex());
  // Field boundaries are hashed: ("ab", "c") is not ("a", "bc").
  CompileCacheKey a("so", "id"), b("so", "id");
  a.add("ab", "c");
  b.add("a", "bc");
  EXPECT_NE(a.hex(), b.hex());
}

TEST(CompileCacheKeyTest, TheModuleTextAndItsLocationsCount) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::func::FuncDialect>();
  mlir::OpBuilder b(&ctx);
  auto make = [&](llvm::StringRef name, mlir::Location loc) {
    mlir::OwningOpRef<mlir::ModuleOp> m = mlir::ModuleOp::create(loc);
    b.setInsertionPointToEnd(m->getBody());
    b.create<mlir::func::FuncOp>(loc, name, b.getFunctionType({}, {}))
        .setPrivate();
    return m;
  };
  auto hexOf = [](mlir::ModuleOp m) {
    CompileCacheKey k("so", "id");
    k.addOperation("module", m);
    return k.hex();
  };
  mlir::Location here = mlir::FileLineColLoc::get(&ctx, "a.mlir", 1, 1);
  mlir::Location there = mlir::FileLineColLoc::get(&ctx, "a.mlir", 2, 1);
  auto m1 = make("f", here), m2 = make("f", here), m3 = make("g", here),
       m4 = make("f", there);
  EXPECT_EQ(hexOf(*m1), hexOf(*m2));
  EXPECT_NE(hexOf(*m1), hexOf(*m3));
  EXPECT_NE(hexOf(*m1), hexOf(*m4));
}

TEST_F(CompileCacheTest, StoredPayloadsAreReadBackUnderTheirKeyOnly) {
  llvm::Expected<CompileCache> cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache)) << llvm::toString(cache.takeError());
  EXPECT_FALSE(cache->lookup(key("a")).has_value());
  std::string payload("\x7f" "ELF\0with NULs\0", 15);
  ASSERT_FALSE(bool(cache->store(key("a"), payload)));
  std::optional<std::string> hit = cache->lookup(key("a"));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, payload);
  EXPECT_FALSE(cache->lookup(key("b")).has_value());
  EXPECT_EQ(cache->entryPath(key("a")), path(key("a").hex() + ".so"));
  // An empty payload is a payload.
  ASSERT_FALSE(bool(cache->store(key("empty"), "")));
  EXPECT_EQ(cache->lookup(key("empty")), std::optional<std::string>(""));
  // No temporary file is left behind.
  std::error_code ec;
  int files = 0;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec))
    ++files;
  EXPECT_EQ(files, 2);
}

TEST_F(CompileCacheTest, DamagedEntriesAreMissesAndStoresReplaceThem) {
  llvm::Expected<CompileCache> cache = CompileCache::open(dir);
  ASSERT_TRUE(bool(cache));
  ASSERT_FALSE(bool(cache->store(key("a"), "payload bytes")));
  std::string entry = cache->entryPath(key("a"));
  auto rewrite = [&](auto edit) {
    auto buffer = llvm::MemoryBuffer::getFile(entry);
    ASSERT_TRUE(bool(buffer));
    std::string bytes = (*buffer)->getBuffer().str();
    edit(bytes);
    std::error_code ec;
    llvm::raw_fd_ostream os(entry, ec);
    ASSERT_FALSE(ec);
    os << bytes;
  };
  rewrite([](std::string &b) { b.back() ^= 1; }); // payload
  EXPECT_FALSE(cache->lookup(key("a")).has_value());
  ASSERT_FALSE(bool(cache->store(key("a"), "payload bytes")));
  EXPECT_EQ(cache->lookup(key("a")),
            std::optional<std::string>("payload bytes"));
  rewrite([](std::string &b) { b[0] = 'X'; }); // magic
  EXPECT_FALSE(cache->lookup(key("a")).has_value());
  ASSERT_FALSE(bool(cache->store(key("a"), "payload bytes")));
  rewrite([](std::string &b) { b[8] = 2; }); // format version
  EXPECT_FALSE(cache->lookup(key("a")).has_value());
  ASSERT_FALSE(bool(cache->store(key("a"), "payload bytes")));
  rewrite([](std::string &b) { b.resize(30); }); // truncated header
  EXPECT_FALSE(cache->lookup(key("a")).has_value());
  rewrite([](std::string &b) { b.clear(); });
  EXPECT_FALSE(cache->lookup(key("a")).has_value());
}

TEST_F(CompileCacheTest, OpenCreatesTheDirectoryOrSaysWhyNot) {
  llvm::Expected<CompileCache> nested = CompileCache::open(path("x/y/z"));
  ASSERT_TRUE(bool(nested)) << llvm::toString(nested.takeError());
  EXPECT_TRUE(llvm::sys::fs::is_directory(path("x/y/z")));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path("file"), ec);
    ASSERT_FALSE(ec);
  }
  llvm::Expected<CompileCache> underFile = CompileCache::open(path("file/sub"));
  ASSERT_FALSE(bool(underFile));
  EXPECT_NE(llvm::toString(underFile.takeError())
                .find("compile cache: cannot create directory"),
            std::string::npos);
  llvm::Expected<CompileCache> isFile = CompileCache::open(path("file"));
  ASSERT_FALSE(bool(isFile));
  EXPECT_NE(llvm::toString(isFile.takeError()).find("is not a directory"),
            std::string::npos);
  EXPECT_FALSE(bool(CompileCache::open("")));
}

TEST_F(CompileCacheTest, AStoreIntoAVanishedDirectoryIsAnError) {
  llvm::Expected<CompileCache> cache = CompileCache::open(path("gone"));
  ASSERT_TRUE(bool(cache));
  ASSERT_FALSE(llvm::sys::fs::remove_directories(path("gone")));
  llvm::Error e = cache->store(key("a"), "bytes");
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("cannot create a temporary file"),
            std::string::npos);
}

TEST_F(CompileCacheTest, OpenCompileCacheWarnsOnTheAnchorAndGoesOn) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::func::FuncDialect>();
  mlir::OpBuilder b(&ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::FileLineColLoc::get(&ctx, "m.mlir", 3, 7));
  std::vector<std::string> warnings;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << d.getLocation() << ": " << d;
    warnings.push_back(text);
    EXPECT_EQ(d.getSeverity(), mlir::DiagnosticSeverity::Warning);
    return mlir::success();
  });

  // No directory: no cache, nothing said.
  EXPECT_FALSE(openCompileCache(*module, "").has_value());
  EXPECT_TRUE(warnings.empty());

  // A usable directory: the cache there, keyed by this compiler.
  std::optional<OpenCompileCache> open =
      openCompileCache(*module, path("cache"));
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->cache.directory(), path("cache"));
  llvm::Expected<std::string> id = compilerIdentity();
  ASSERT_TRUE(bool(id)) << llvm::toString(id.takeError());
  EXPECT_EQ(open->identity, *id);
  EXPECT_TRUE(warnings.empty());

  // A file where the directory should be: a located warning, no cache.
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path("file"), ec);
    ASSERT_FALSE(ec);
  }
  EXPECT_FALSE(openCompileCache(*module, path("file")).has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("loc(\"m.mlir\":3:7): compile cache: ", 0), 0u)
      << warnings[0];
  EXPECT_NE(warnings[0].find("is not a directory (compiling without the cache)"),
            std::string::npos)
      << warnings[0];
}

TEST(CompilerIdentityTest, NamesTheBuildIdAndLLVM) {
  llvm::Expected<std::string> id = compilerIdentity();
  ASSERT_TRUE(bool(id)) << llvm::toString(id.takeError());
  EXPECT_EQ(id->rfind("build-id ", 0), 0u) << *id;
  EXPECT_NE(id->find(" llvm 19."), std::string::npos) << *id;
}

} // namespace
