//===- EmuGraphTest.cpp - entry points captured into CUDA graphs ----------===//
//
// rt::CudaBackend::CaptureGraph / LaunchGraph (issue 13 item 3) on the
// emulated device: the host code of a compiled function is captured into a
// CUDA graph (nothing runs: its outputs still hold the emulator's NaN fill
// after the capture), replayed twice, and its results are compared bit for
// bit with a direct call of the same function; the graph has one node per
// kernel launch and cuBLAS GEMM of the direct call (plus the memsets), and
// the capture launches nothing itself. The functions: a block-decoder-like
// MLP (layer_norm → linear → gelu → linear: kernels and GEMMs) and a local
// KV cache allocated, appended and attended inside the call (blocks
// allocated and released during the capture, which the graph keeps).
// RecordedEntryReplaysOnNewInputs: the runtime's recording of an entry point
// (rt::RecordDeviceEntryPointResident) replayed on new inputs (copied into
// its slots) against direct calls, and its refusals of other shapes.
//
//===----------------------------------------------------------------------===//

#include "EmuCompare.h"
#include "EmuDevice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace bt::test {
namespace {

int64_t g_graph = 0;
int64_t g_resultWords = 0; // of the first result's descriptor, f32 rank

/// Kernels::call's invoker: capture, check that nothing ran, replay twice.
void captureAndReplay(void (*entry)(void **), void **argv) {
  std::string error;
  const emu::Counters before = emu::counters();
  g_graph = emu::captureGraph(entry, argv, error);
  ASSERT_GT(g_graph, 0) << error;
  const emu::Counters captured = emu::counters();
  EXPECT_EQ(captured.kernels, before.kernels) << "the capture launched";
  EXPECT_EQ(captured.gemms, before.gemms) << "the capture ran a GEMM";
  // argv[0] is the result block: the first result's aligned pointer.
  const auto *desc = static_cast<const int64_t *>(argv[0]);
  float first = 0;
  emu::download(&first, reinterpret_cast<const void *>(desc[1]), sizeof first);
  EXPECT_TRUE(std::isnan(first)) << "the output was written by the capture";
  for (int replay = 0; replay < 2; ++replay)
    ASSERT_TRUE(emu::launchGraph(g_graph, error)) << error;
}

const DeviceMemory kGraphMemory = {&emu::upload, &emu::download,
                                   &emu::release, &captureAndReplay};
const DeviceMemory kDirectMemory = {&emu::upload, &emu::download,
                                    &emu::release};

void expectSameBits(const Array &a, const Array &b, size_t result) {
  EXPECT_EQ(a.shape, b.shape) << "result " << result;
  EXPECT_EQ(a.i, b.i) << "result " << result;
  ASSERT_EQ(a.f.size(), b.f.size()) << "result " << result;
  EXPECT_EQ(std::memcmp(a.f.data(), b.f.data(), a.f.size() * sizeof(float)), 0)
      << "result " << result << " differs from the direct call";
}

/// Calls `name` directly and through a graph; compares results and counts.
void expectReplayed(BothTargets &both, const std::string &name,
                    const std::vector<const Array *> &args,
                    const std::vector<ResultSpec> &results) {
  SCOPED_TRACE(name);
  // Loads the module and checks the direct call against the CPU target.
  expectSame(both, name, args, results, "direct", {1e-5, {}});
  const emu::Counters c0 = emu::counters();
  std::vector<Result> direct = both.gpu->call(name, args, results, &kDirectMemory);
  const emu::Counters c1 = emu::counters();
  const int64_t launched = (c1.kernels - c0.kernels) + (c1.gemms - c0.gemms);
  ASSERT_GT(c1.gemms - c0.gemms + (c1.kernels - c0.kernels), 0);
  std::vector<Result> replayed =
      both.gpu->call(name, args, results, &kGraphMemory);
  const emu::Counters c2 = emu::counters();
  ASSERT_GT(g_graph, 0);
  const int64_t nodes = emu::graphNodes(g_graph);
  EXPECT_GE(nodes, launched); // kernels + GEMMs, and any memsets
  EXPECT_LE(nodes, launched + 8);
  EXPECT_EQ(c2.kernels, c1.kernels) << "the replays launched kernels";
  EXPECT_EQ(c2.graphLaunches - c1.graphLaunches, 2);
  EXPECT_EQ(c2.graphNodes - c1.graphNodes, 2 * nodes);
  ASSERT_EQ(replayed.size(), direct.size());
  for (size_t r = 0; r < direct.size(); ++r)
    expectSameBits(replayed[r].value, direct[r].value, r);
  emu::destroyGraph(g_graph);
  g_graph = 0;
}

const char *const kModule = R"mlir(
    !l = !bt.kv_cache<local, batch = 2, layers = 1, heads = 2, capacity = 6, head_dim = 8, f32>
    func.func @mlp(%x: tensor<3x2x32xf32>, %lw: tensor<32xf32>, %lb: tensor<32xf32>,
                   %w1: tensor<64x32xf32>, %b1: tensor<64xf32>,
                   %w2: tensor<32x64xf32>, %b2: tensor<32xf32>) -> tensor<3x2x32xf32> {
      %n = bt.layer_norm %x, %lw, %lb eps 1.0e-05 : tensor<3x2x32xf32>, tensor<32xf32>, tensor<32xf32> -> tensor<3x2x32xf32>
      %h = bt.linear %n, %w1, %b1 : tensor<3x2x32xf32>, tensor<64x32xf32>, tensor<64xf32> -> tensor<3x2x64xf32>
      %g = bt.gelu %h : tensor<3x2x64xf32>
      %y = bt.linear %g, %w2, %b2 : tensor<3x2x64xf32>, tensor<32x64xf32>, tensor<32xf32> -> tensor<3x2x32xf32>
      return %y : tensor<3x2x32xf32>
    }
    func.func @local_cache(%x: tensor<2x2x2x8xf32>, %q: tensor<2x3x2x8xf32>) -> tensor<2x3x2x8xf32> {
      %c0 = bt.kv_alloc : !l
      %c1 = bt.kv_append %c0[0], %x, %x : !l, tensor<2x2x2x8xf32>
      %c2 = bt.kv_append %c1[0], %q, %q : !l, tensor<2x3x2x8xf32>
      %o = bt.kv_attend %q, %c2[0] scale 0.35355339059327373 : tensor<2x3x2x8xf32>, !l -> tensor<2x3x2x8xf32>
      bt.kv_release %c2 : !l
      return %o : tensor<2x3x2x8xf32>
    })mlir";

TEST(Graphs, ReplayedCallsMatchDirectCalls) {
  std::string error;
  auto both = compileBoth(kModule, error);
  ASSERT_TRUE(both) << error;
  std::mt19937 rng(13);
  Array x = Array::random({3, 2, 32}, rng), lw = Array::random({32}, rng),
        lb = Array::random({32}, rng), w1 = Array::random({64, 32}, rng),
        b1 = Array::random({64}, rng), w2 = Array::random({32, 64}, rng),
        b2 = Array::random({32}, rng);
  expectReplayed(*both, "mlp", {&x, &lw, &lb, &w1, &b1, &w2, &b2}, {{3}});
  Array kx = Array::random({2, 2, 2, 8}, rng), kq = Array::random({2, 3, 2, 8}, rng);
  expectReplayed(*both, "local_cache", {&kx, &kq}, {{4}});
}

// The runtime's recording of an entry point (rt::DeviceRecording): every
// input gets a slot that each Replay fills, so replays on new inputs give
// the direct call's results on them; a replay on other shapes or another
// number of inputs is refused, naming the input.
TEST(Graphs, RecordedEntryReplaysOnNewInputs) {
  std::string error;
  auto both = compileBoth(kModule, error);
  ASSERT_TRUE(both) << error;
  ASSERT_TRUE(emu::loadModule(both->emulatorImage, error)) << error;
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 2, 32}, {32}, {32}, {64, 32}, {64}, {32, 64}, {32}};
  auto entry = reinterpret_cast<void (*)(void **)>(both->gpu->symbol("bt_entry_mlp"));
  ASSERT_NE(entry, nullptr);
  const int64_t id = emu::recordEntry(entry, "mlp", shapes, 3, error);
  ASSERT_GT(id, 0) << error;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2; ++trial) {
    std::vector<Array> in;
    for (const auto &shape : shapes)
      in.push_back(Array::random(shape, rng));
    std::vector<const Array *> args;
    std::vector<const float *> data;
    for (const Array &a : in) {
      args.push_back(&a);
      data.push_back(a.f.data());
    }
    std::vector<Result> direct = both->gpu->call("mlp", args, {{3}}, &kDirectMemory);
    ASSERT_EQ(direct.size(), 1u);
    std::vector<float> out;
    ASSERT_EQ(emu::replayEntry(id, shapes, data, out), "");
    ASSERT_EQ(out.size(), direct[0].value.f.size());
    EXPECT_EQ(std::memcmp(out.data(), direct[0].value.f.data(), out.size() * 4), 0)
        << "trial " << trial;
  }
  std::vector<std::vector<int64_t>> wrong = shapes;
  wrong[0] = {4, 2, 32};
  std::vector<float> out;
  EXPECT_NE(emu::replayEntry(id, wrong, {}, out).find(
                "input 'in0' is F32[4, 2, 32], recorded as F32[3, 2, 32]"),
            std::string::npos)
      << emu::replayEntry(id, wrong, {}, out);
  wrong.pop_back();
  EXPECT_NE(emu::replayEntry(id, wrong, {}, out).find("6 inputs, recorded with 7"),
            std::string::npos);
  emu::destroyEntry(id);
}

} // namespace
} // namespace bt::test
