//===- sampler_callback.cc - the kernels' sampler callback -----------------===//

#include "bt/runtime/device/sampler_callback.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_map.h"

namespace bt::rt {
namespace {

std::mutex &RegistryMutex() {
  static std::mutex m;
  return m;
}

absl::flat_hash_map<int64_t, SamplerCallbackTarget *> &Registry() {
  static auto *r = new absl::flat_hash_map<int64_t, SamplerCallbackTarget *>();
  return *r;
}

std::atomic<int64_t> next_handle{1};

} // namespace

int64_t RegisterSamplerTarget(SamplerCallbackTarget *target) {
  const int64_t handle = next_handle.fetch_add(1);
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry()[handle] = target;
  return handle;
}

void UnregisterSamplerTarget(int64_t handle) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  Registry().erase(handle);
}

SamplerCallbackTarget *LookupSamplerTarget(int64_t handle) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto it = Registry().find(handle);
  return it == Registry().end() ? nullptr : it->second;
}

int64_t ArgMax(const float *logits, int64_t vocab, int64_t stride) {
  if (stride == 1) {
    // Contiguous rows (every decode step's logits): the maximum over 4 x 4
    // lanes of baseline-x86-64 vectors (SSE: compare + blend, no branch per
    // logit), then the first 16-logit group holding it and the first id in
    // it. The same id as the scan below: the lowest among the logits equal
    // to the maximum (+0 == -0, an all -inf row gives 0), -1 for a NaN.
    typedef float V4 __attribute__((vector_size(16)));
    typedef int32_t M4 __attribute__((vector_size(16)));
    constexpr int64_t kGroup = 16; // 4 vectors
    const int64_t full = vocab - vocab % kGroup;
    V4 lane_max[4], x[4];
    M4 lane_nan[4];
    for (int k = 0; k < 4; ++k) {
      lane_max[k] = V4{} - INFINITY;
      lane_nan[k] = M4{};
    }
    for (int64_t v = 0; v < full; v += kGroup) {
      std::memcpy(x, logits + v, sizeof(x));
      for (int k = 0; k < 4; ++k) {
        lane_nan[k] |= x[k] != x[k];
        lane_max[k] = x[k] > lane_max[k] ? x[k] : lane_max[k];
      }
    }
    float max = -INFINITY;
    bool nan = false;
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) {
        nan |= lane_nan[k][j] != 0;
        max = lane_max[k][j] > max ? lane_max[k][j] : max;
      }
    for (int64_t v = full; v < vocab; ++v) {
      nan |= std::isnan(logits[v]);
      max = logits[v] > max ? logits[v] : max;
    }
    if (nan)
      return -1;
    const V4 target = V4{} + max;
    int64_t from = full;
    for (int64_t v = 0; v < full; v += kGroup) {
      std::memcpy(x, logits + v, sizeof(x));
      const M4 hit =
          (x[0] == target) | (x[1] == target) | (x[2] == target) |
          (x[3] == target);
      if ((hit[0] | hit[1] | hit[2] | hit[3]) != 0) {
        from = v;
        break;
      }
    }
    for (int64_t v = from; v < vocab; ++v)
      if (logits[v] == max)
        return v;
    return 0; // vocab == 0
  }
  int64_t best = 0;
  float best_v = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) {
    const float l = logits[v * stride];
    if (std::isnan(l))
      return -1;
    if (l > best_v) {
      best_v = l;
      best = v;
    }
  }
  return best;
}

} // namespace bt::rt

extern "C" __attribute__((visibility("default"), used)) void
_mlir_ciface_bt_rt_sample(int64_t sampler,
                          bt::rt::StridedMemRef<float, 2> *logits,
                          bt::rt::StridedMemRef<int64_t, 1> *tokens) {
  if (logits == nullptr || tokens == nullptr) {
    std::fprintf(stderr, "bt runtime: _mlir_ciface_bt_rt_sample called with a "
                         "null memref descriptor\n");
    std::abort();
  }
  if (sampler == 0) {
    // Stateless greedy: argmax per row (NaN rows give 0).
    for (int64_t r = 0; r < tokens->sizes[0] && r < logits->sizes[0]; ++r) {
      const int64_t a = bt::rt::ArgMax(
          logits->aligned + logits->offset + r * logits->strides[0],
          logits->sizes[1], logits->strides[1]);
      tokens->aligned[tokens->offset + r * tokens->strides[0]] = a < 0 ? 0 : a;
    }
    return;
  }
  bt::rt::SamplerCallbackTarget *s = bt::rt::LookupSamplerTarget(sampler);
  if (s == nullptr) {
    std::fprintf(stderr,
                 "bt runtime: _mlir_ciface_bt_rt_sample called with unknown "
                 "sampler handle %lld (the entry point's `sampler` input must "
                 "be the handle of a live bt::rt::Sampler, or 0 for greedy)\n",
                 static_cast<long long>(sampler));
    std::abort();
  }
  s->Step(*logits, *tokens);
}
