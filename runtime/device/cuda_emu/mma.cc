// The warp matrix multiply-accumulate of the emulated device (bt_emu_mma,
// bt_emu_abi.h): the arithmetic of one warp's mma.sync once all its lanes
// arrived (launch.cc schedules the lanes and checks that they did).
//
// Numerics (docs/cuda-emulator.md): a bf16 x bf16 product is exact in f32;
// the emulator sums the 16 products and the accumulator in double and rounds
// to f32 once. A tensor core's adder tree keeps its own internal precision
// (an order-dependent, not IEEE-specified rounding), so a GPU may differ from
// this in the last bits of D; the bf16 tolerance of the tests covers that.

#include <cstdint>
#include <cstring>

#include "emulator.h"

namespace bt::cuda_emu {
namespace {

constexpr int kM = 16, kN = 8, kK = 16, kWarp = 32;

/// The bf16 in the lower (hi = false) or upper half of `word`, as f32.
float Bf16Half(uint32_t word, bool hi) {
  const uint32_t bits = (hi ? word >> 16 : word & 0xffffu) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float WordAsFloat(uint32_t w) {
  float f;
  std::memcpy(&f, &w, sizeof f);
  return f;
}

uint32_t FloatAsWord(float f) {
  uint32_t w;
  std::memcpy(&w, &f, sizeof w);
  return w;
}

} // namespace

void MmaM16N8K16Bf16F32(uint32_t *const frags[32]) {
  float a[kM][kK], b[kK][kN], c[kM][kN];
  for (int lane = 0; lane < kWarp; ++lane) {
    const uint32_t *f = frags[lane];
    const int g = lane / 4, q = lane % 4;
    for (int h = 0; h < 2; ++h) {
      a[g][2 * q + h] = Bf16Half(f[0], h);
      a[g + 8][2 * q + h] = Bf16Half(f[1], h);
      a[g][2 * q + 8 + h] = Bf16Half(f[2], h);
      a[g + 8][2 * q + 8 + h] = Bf16Half(f[3], h);
      b[2 * q + h][g] = Bf16Half(f[4], h);
      b[2 * q + 8 + h][g] = Bf16Half(f[5], h);
      c[g][2 * q + h] = WordAsFloat(f[6 + h]);
      c[g + 8][2 * q + h] = WordAsFloat(f[8 + h]);
    }
  }
  float d[kM][kN];
  for (int i = 0; i < kM; ++i)
    for (int j = 0; j < kN; ++j) {
      double acc = c[i][j];
      for (int k = 0; k < kK; ++k)
        acc += static_cast<double>(a[i][k]) * b[k][j];
      d[i][j] = static_cast<float>(acc);
    }
  for (int lane = 0; lane < kWarp; ++lane) {
    uint32_t *f = frags[lane];
    const int g = lane / 4, q = lane % 4;
    for (int h = 0; h < 2; ++h) {
      f[10 + h] = FloatAsWord(d[g][2 * q + h]);
      f[12 + h] = FloatAsWord(d[g + 8][2 * q + h]);
    }
  }
}

} // namespace bt::cuda_emu
