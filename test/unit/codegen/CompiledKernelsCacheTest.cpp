//===- CompiledKernelsCacheTest.cpp - CompiledKernels as cache bytes ------===//
//
// serializeCompiledKernels / deserializeCompiledKernels (bt/Compiler/
// Compiler.h): every field survives the round trip, binary shared objects
// included, and damaged bytes are errors, never a partly filled result.
//
//===----------------------------------------------------------------------===//

#include "bt/Compiler/Compiler.h"

#include <gtest/gtest.h>

using namespace bt;
using namespace bt::compiler;

namespace {

CompiledKernels sample() {
  CompiledKernels k;
  EntryPoint e;
  e.name = "decode_block";
  e.symbol = "bt_entry_decode_block";
  e.params = {"embedder.weight", "lm_head.weight"};
  e.paramDTypes = {"F32", "BF16"};
  TensorSpec cache;
  cache.name = "kv_cache";
  cache.dtype = "BF16";
  cache.shape = {-1, 2, 2, 4, 16, 8};
  cache.dimNames = {"B", "", "", "H", "C", "hd"};
  cache.inout = true;
  TensorSpec step;
  step.name = "step";
  step.dtype = "I64";
  step.hostScalar = true;
  e.inputs = {cache, step};
  TensorSpec logits;
  logits.name = "logits";
  logits.dtype = "F32";
  logits.shape = {-1, 4, 512};
  e.outputs = {logits};
  k.interface.entryPoints = {e, EntryPoint{}};
  k.interface.kvPlan.blockLength = 4;
  k.interface.kvPlan.globalBytesPerEntry = int64_t(1) << 40;
  k.interface.kvPlan.localBytesPerSequence = 7;
  k.interface.kvPlan.weightBytes = 123456789;
  k.interface.kvPlan.source = "kv-cache lifetimes";
  k.sharedObject = std::string("\x7f" "ELF\0\0\x01\xff", 8);
  k.cpu = "znver4";
  k.ptx = "//\n.version 8.4\n.target sm_90\n\"quoted\" \\ tab\t";
  k.gpuChip = "sm_90";
  k.cudaEmu = std::string("\0emu\0", 5);
  return k;
}

void expectSpecEq(const TensorSpec &a, const TensorSpec &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.dimNames, b.dimNames);
  EXPECT_EQ(a.inout, b.inout);
  EXPECT_EQ(a.hostScalar, b.hostScalar);
}

TEST(CompiledKernelsCacheTest, EveryFieldSurvivesTheRoundTrip) {
  CompiledKernels in = sample();
  llvm::Expected<CompiledKernels> out =
      deserializeCompiledKernels(serializeCompiledKernels(in));
  ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
  ASSERT_EQ(out->interface.entryPoints.size(), 2u);
  const EntryPoint &a = in.interface.entryPoints[0];
  const EntryPoint &b = out->interface.entryPoints[0];
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.symbol, b.symbol);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.paramDTypes, b.paramDTypes);
  ASSERT_EQ(b.inputs.size(), 2u);
  ASSERT_EQ(b.outputs.size(), 1u);
  expectSpecEq(a.inputs[0], b.inputs[0]);
  expectSpecEq(a.inputs[1], b.inputs[1]);
  expectSpecEq(a.outputs[0], b.outputs[0]);
  EXPECT_TRUE(out->interface.entryPoints[1].inputs.empty());
  EXPECT_EQ(out->interface.kvPlan.blockLength, 4);
  EXPECT_EQ(out->interface.kvPlan.globalBytesPerEntry, int64_t(1) << 40);
  EXPECT_EQ(out->interface.kvPlan.localBytesPerSequence, 7);
  EXPECT_EQ(out->interface.kvPlan.weightBytes, 123456789);
  EXPECT_EQ(out->interface.kvPlan.source, "kv-cache lifetimes");
  EXPECT_EQ(out->sharedObject, in.sharedObject);
  EXPECT_EQ(out->cpu, in.cpu);
  EXPECT_EQ(out->ptx, in.ptx);
  EXPECT_EQ(out->gpuChip, in.gpuChip);
  EXPECT_EQ(out->cudaEmu, in.cudaEmu);
  // Serializing is deterministic (the bytes are a cache payload).
  EXPECT_EQ(serializeCompiledKernels(in),
            serializeCompiledKernels(*out));
}

TEST(CompiledKernelsCacheTest, DamagedBytesAreErrors) {
  std::string bytes = serializeCompiledKernels(sample());
  for (size_t cut : {size_t(0), size_t(5), size_t(8), bytes.size() - 1}) {
    llvm::Expected<CompiledKernels> k =
        deserializeCompiledKernels(llvm::StringRef(bytes).take_front(cut));
    ASSERT_FALSE(bool(k)) << cut;
    EXPECT_NE(llvm::toString(k.takeError()).find("truncated"),
              std::string::npos);
  }
  llvm::Expected<CompiledKernels> trailing =
      deserializeCompiledKernels(bytes + "x");
  ASSERT_FALSE(bool(trailing));
  EXPECT_NE(llvm::toString(trailing.takeError()).find("trailing"),
            std::string::npos);

  // JSON that is not JSON, and JSON without a field.
  auto withJSON = [](llvm::StringRef json) {
    std::string out;
    for (llvm::StringRef section : {json, llvm::StringRef(), llvm::StringRef()}) {
      uint64_t n = section.size();
      out.append(reinterpret_cast<const char *>(&n), 8); // little-endian host
      out.append(section.str());
    }
    return out;
  };
  llvm::Expected<CompiledKernels> notJSON =
      deserializeCompiledKernels(withJSON("{\"cpu\": "));
  EXPECT_FALSE(bool(notJSON));
  llvm::consumeError(notJSON.takeError());
  llvm::Expected<CompiledKernels> missing = deserializeCompiledKernels(
      withJSON("{\"entryPoints\": [], \"cpu\": \"x\", \"ptx\": \"\", "
               "\"gpuChip\": \"\"}"));
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("kvPlan"),
            std::string::npos);
  llvm::Expected<CompiledKernels> mistyped = deserializeCompiledKernels(
      withJSON("{\"entryPoints\": [{\"name\": 3}], \"kvPlan\": {}, "
               "\"cpu\": \"x\", \"ptx\": \"\", \"gpuChip\": \"\"}"));
  EXPECT_FALSE(bool(mistyped));
  llvm::consumeError(mistyped.takeError());
}

} // namespace
