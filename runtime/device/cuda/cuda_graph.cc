//===- cuda_graph.cc - CUDA graphs of a CudaBackend -----------------------===//
//
// CudaBackend::CaptureGraph / LaunchGraph and CudaGraph (cuda.h): a stream
// capture of what a function issues, instantiated and replayed; the device
// blocks the host code allocates during the capture belong to the graph.
// The graph API is optional in the driver (CudaDriver::has_graphs).
//
//===----------------------------------------------------------------------===//

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "bt/runtime/base/status_macros.h"
#include "bt/runtime/device/cuda/cuda.h"
#include "bt/runtime/device/cuda/cuda_driver.h"

namespace bt::rt {

constexpr int kCaptureModeRelaxed = 2; // CU_STREAM_CAPTURE_MODE_RELAXED

bool CudaBackend::has_graphs() const { return driver_->has_graphs(); }

absl::StatusOr<std::unique_ptr<CudaGraph>>
CudaBackend::CaptureGraph(const std::function<absl::Status()> &work) {
  if (!driver_->has_graphs())
    return absl::UnimplementedError(absl::StrCat(
        "CUDA driver ", driver_->path,
        " lacks the graph API (cuStreamBeginCapture_v2, cuGraphLaunch, ...)"));
  if (capturing())
    return absl::FailedPreconditionError(
        "CaptureGraph: a capture is already in progress on this backend");
  // Relaxed: the pool may call cuMemAlloc while the stream captures.
  BT_RETURN_IF_ERROR(
      Check(driver_->cuStreamBeginCapture_v2(stream_, kCaptureModeRelaxed),
            "cuStreamBeginCapture"));
  capture_ = std::make_unique<Capture>();
  absl::Status worked = work();
  std::unique_ptr<Capture> captured = std::move(capture_);
  void *graph = nullptr;
  const CUresult ended = driver_->cuStreamEndCapture(stream_, &graph);
  auto graph_closer = absl::MakeCleanup([&] {
    if (graph != nullptr)
      driver_->cuGraphDestroy(graph);
  });
  std::sort(captured->blocks.begin(), captured->blocks.end());
  captured->blocks.erase(
      std::unique(captured->blocks.begin(), captured->blocks.end()),
      captured->blocks.end());
  auto release = [&] {
    for (uint64_t block : captured->blocks)
      (void)pool_->Free(block);
  };
  if (!worked.ok() || ended != kCudaSuccess) {
    release();
    return worked.ok() ? Check(ended, "cuStreamEndCapture") : worked;
  }
  auto g = std::unique_ptr<CudaGraph>(new CudaGraph());
  g->backend_ = this;
  size_t nodes = 0;
  absl::Status s = Check(driver_->cuGraphGetNodes(graph, nullptr, &nodes),
                         "cuGraphGetNodes");
  if (s.ok())
    s = Check(driver_->cuGraphInstantiateWithFlags(&g->exec_, graph, 0),
              "cuGraphInstantiate");
  if (!s.ok()) {
    release();
    return s;
  }
  g->nodes_ = static_cast<int64_t>(nodes);
  g->blocks_ = std::move(captured->blocks);
  std::lock_guard<std::mutex> lock(graph_blocks_mu_);
  for (uint64_t block : g->blocks_)
    ++graph_blocks_[block];
  return g;
}

absl::Status CudaBackend::LaunchGraph(const CudaGraph &graph) {
  if (graph.backend_ != this)
    return absl::InvalidArgumentError(
        "LaunchGraph: the graph was captured on another backend");
  ++graph_launches_;
  graph_nodes_launched_ += graph.nodes_;
  return Check(driver_->cuGraphLaunch(graph.exec_, stream_), "cuGraphLaunch");
}

void CudaBackend::NoteCapturedAllocation(uint64_t block) {
  if (capture_ != nullptr && block != 0)
    capture_->blocks.push_back(block);
}

bool CudaBackend::DeferCapturedFree(uint64_t block) {
  if (capture_ == nullptr)
    return false;
  capture_->blocks.push_back(block);
  return true;
}

bool CudaBackend::OwnedByGraph(uint64_t block) const {
  std::lock_guard<std::mutex> lock(graph_blocks_mu_);
  return graph_blocks_.count(block) != 0;
}

CudaGraph::~CudaGraph() {
  if (backend_ == nullptr)
    return;
  CudaBackend &b = *backend_;
  (void)b.Synchronize(); // a replay may still write the blocks
  if (exec_ != nullptr)
    b.driver_->cuGraphExecDestroy(exec_);
  std::lock_guard<std::mutex> lock(b.graph_blocks_mu_);
  for (uint64_t block : blocks_) {
    auto it = b.graph_blocks_.find(block);
    if (it != b.graph_blocks_.end() && --it->second == 0)
      b.graph_blocks_.erase(it);
    (void)b.pool_->Free(block);
  }
}

} // namespace bt::rt
