/*===- gen_test_kernels.c - a fake model with the generation entry points ---===*
 *
 * A kernel library written by hand that implements the generation entry
 * points of docs/generation.md through the ABI of docs/abi.md, for a tiny
 * deterministic fake model, so that the runtime's generation loop (KV
 * caches as in-out arguments, cache_length, EOS, compaction, positions and
 * the sampler callback) is tested for real. generate_test.cc re-implements
 * the same model without caches or batching (its "oracle").
 *
 * Block model (V = 16, L_B = 4, P = 2, D = 4; kv_cache [B, 1, 2, 1, C, 2],
 * kv_valid [B, C]; param `peak` F32[1]):
 *   cache entry e of a block with tokens t[0..3] and block mask m:
 *     k = (hash = sum_i t[i] * (i + 1), e), v = (t[3], 1), kv_valid = m
 *   context after the last entry `last` (only valid entries count; an entry
 *   e <= last whose stored index or marker is wrong poisons ctx[1] = NaN):
 *     ctx = (t[3] of entry last, sum_valid hash_e * (e + 1) mod 1009,
 *            #valid entries, last)
 *   decode_tokens step k: prev = k ? tokens[k-1] : ctx[0];
 *     logits[v] = (v == (prev + 1) % V ? peak : 0)
 *                 + fmod(ctx[1] + 3 ctx[2] + 5 ctx[3] + 7 pos + 11 k, 97) / 1000
 *     with pos = positions[P - 1 + k]; the sampler picks tokens[k] (the next
 *     step is fed the sampler's token, e.g. the pad after EOS).
 * Vanilla model (V = 16; kv_cache [B, 1, 2, 1, C, 2]; param `peak`):
 *   cache entry e of token x at position p with mask m: k = (x, p), v = (m, 1)
 *   logits after the last entry `last`:
 *     (v == (x_last + 1) % V ? peak : 0)
 *     + fmod(sum_valid (x_e + 1) * (p_e + 2) + 3 last, 97) / 1000
 *
 *===----------------------------------------------------------------------===*/

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define V 16
#define LB 4
#define NP 2
#define D 4

typedef struct {
  int64_t *allocated, *aligned;
  int64_t offset;
} memref0i;
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
} memref1f;
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} memref2f;
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[3], strides[3];
} memref3f;
typedef struct {
  int64_t *allocated, *aligned;
  int64_t offset, sizes[1], strides[1];
} memref1i;
typedef struct {
  int64_t *allocated, *aligned;
  int64_t offset, sizes[2], strides[2];
} memref2i;
typedef struct {
  int64_t *allocated, *aligned;
  int64_t offset, sizes[3], strides[3];
} memref3i;
typedef struct {
  float *allocated, *aligned;
  int64_t offset, sizes[6], strides[6];
} memref6f;

int32_t bt_kernel_abi_version(void) { return 1; }

/* The runtime's sampler (docs/generation.md): left undefined here and
 * resolved against the loading process, like cblas_sgemm. */
extern void _mlir_ciface_bt_rt_sample(int64_t sampler, memref2f *logits,
                                      memref1i *tokens);

static float *kv_at(const memref6f *kv, int64_t b, int64_t kind, int64_t e,
                    int64_t d) {
  return kv->aligned + kv->offset + b * kv->strides[0] + kind * kv->strides[2] +
         e * kv->strides[4] + d * kv->strides[5];
}
static int64_t *i2_at(const memref2i *m, int64_t i, int64_t j) {
  return m->aligned + m->offset + i * m->strides[0] + j * m->strides[1];
}
static int64_t i3(const memref3i *m, int64_t i, int64_t j, int64_t k) {
  return m->aligned[m->offset + i * m->strides[0] + j * m->strides[1] +
                    k * m->strides[2]];
}

/* ---- block model -------------------------------------------------------- */

/* Appends the blocks ids[:, j, :] (j < nblk) at entries len + j. */
static void block_append(const memref3i *ids, const memref2i *mask,
                         const memref6f *kv, const memref2i *valid,
                         int64_t len) {
  for (int64_t b = 0; b < ids->sizes[0]; ++b)
    for (int64_t j = 0; j < ids->sizes[1]; ++j) {
      int64_t e = len + j, hash = 0;
      for (int64_t i = 0; i < LB; ++i)
        hash += i3(ids, b, j, i) * (i + 1);
      *kv_at(kv, b, 0, e, 0) = (float)hash;
      *kv_at(kv, b, 0, e, 1) = (float)e;
      *kv_at(kv, b, 1, e, 0) = (float)i3(ids, b, j, LB - 1);
      *kv_at(kv, b, 1, e, 1) = 1.0f;
      *i2_at(valid, b, e) = mask ? *i2_at(mask, b, j) : 1;
    }
}

static void block_context(memref2f *out, const memref6f *kv,
                          const memref2i *valid, int64_t last) {
  int64_t B = kv->sizes[0];
  float *buf = (float *)malloc(sizeof(float) * (size_t)(B * D + 1));
  for (int64_t b = 0; b < B; ++b) {
    double sum = 0, count = 0;
    int poisoned = 0;
    for (int64_t e = 0; e <= last; ++e) {
      if (*kv_at(kv, b, 0, e, 1) != (float)e || *kv_at(kv, b, 1, e, 1) != 1.0f)
        poisoned = 1;
      if (*i2_at(valid, b, e)) {
        sum += *kv_at(kv, b, 0, e, 0) * (double)(e + 1);
        count += 1;
      }
    }
    buf[b * D + 0] = *kv_at(kv, b, 1, last, 0);
    buf[b * D + 1] = poisoned ? NAN : (float)fmod(sum, 1009.0);
    buf[b * D + 2] = (float)count;
    buf[b * D + 3] = (float)last;
  }
  out->allocated = out->aligned = buf;
  out->offset = 0;
  out->sizes[0] = B;
  out->sizes[1] = D;
  out->strides[0] = D;
  out->strides[1] = 1;
}

/* prefill(peak; input_ids [B, N, L], block_attention_mask [B, N],
 *         kv_cache INOUT, kv_valid INOUT, cache_length) -> context [B, D] */
void bt_entry_block_prefill(void **argv) {
  const memref3i *ids = (const memref3i *)argv[2];
  const memref2i *mask = (const memref2i *)argv[3];
  const memref6f *kv = (const memref6f *)argv[4];
  const memref2i *valid = (const memref2i *)argv[5];
  const memref0i *len = (const memref0i *)argv[6];
  int64_t l = len->aligned[len->offset];
  block_append(ids, mask, kv, valid, l);
  block_context((memref2f *)argv[0], kv, valid, l + ids->sizes[1] - 1);
}

/* decode_block(peak; input_ids [B, 1, L], kv_cache INOUT, kv_valid INOUT,
 *              cache_length) -> context [B, D] */
void bt_entry_block_decode_block(void **argv) {
  const memref3i *ids = (const memref3i *)argv[2];
  const memref6f *kv = (const memref6f *)argv[3];
  const memref2i *valid = (const memref2i *)argv[4];
  const memref0i *len = (const memref0i *)argv[5];
  int64_t l = len->aligned[len->offset];
  block_append(ids, NULL, kv, valid, l);
  block_context((memref2f *)argv[0], kv, valid, l);
}

/* decode_tokens(peak; context [B, D], positions [P + L - 1], sampler)
 *   -> tokens [B, L] i64, step_logits [B, L, V] f32 */
void bt_entry_block_decode_tokens(void **argv) {
  struct {
    memref2i tokens;
    memref3f logits;
  } *out = argv[0];
  const memref1f *peak = (const memref1f *)argv[1];
  const memref2f *ctx = (const memref2f *)argv[2];
  const memref1i *pos = (const memref1i *)argv[3];
  const memref0i *sampler = (const memref0i *)argv[4];
  int64_t B = ctx->sizes[0];
  float pk = peak->aligned[peak->offset];
  int64_t *tok = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B * LB + 1));
  float *lg = (float *)malloc(sizeof(float) * (size_t)(B * LB * V + 1));
  for (int64_t k = 0; k < LB; ++k) {
    int64_t p = pos->aligned[pos->offset + (NP - 1 + k) * pos->strides[0]];
    for (int64_t b = 0; b < B; ++b) {
      const float *c = ctx->aligned + ctx->offset + b * ctx->strides[0];
      float cv[D];
      for (int i = 0; i < D; ++i)
        cv[i] = c[i * ctx->strides[1]];
      int64_t prev = k ? tok[b * LB + k - 1] : (int64_t)cv[0];
      int64_t target = (prev + 1) % V;
      float sig = (float)fmod((double)cv[1] + 3.0 * cv[2] + 5.0 * cv[3] +
                                  7.0 * (double)p + 11.0 * (double)k,
                              97.0) /
                  1000.0f;
      for (int64_t v = 0; v < V; ++v)
        lg[(b * LB + k) * V + v] = (v == target ? pk : 0.0f) + sig;
    }
    /* The sampler reads step k's logits and writes tokens[:, k] in place:
     * strided views into the outputs (row strides L*V and L). */
    memref2f lv = {lg, lg, k * V, {B, V}, {LB * V, 1}};
    memref1i tv = {tok, tok, k, {B}, {LB}};
    _mlir_ciface_bt_rt_sample(sampler->aligned[sampler->offset], &lv, &tv);
  }
  out->tokens.allocated = out->tokens.aligned = tok;
  out->tokens.offset = 0;
  out->tokens.sizes[0] = B;
  out->tokens.sizes[1] = LB;
  out->tokens.strides[0] = LB;
  out->tokens.strides[1] = 1;
  out->logits.allocated = out->logits.aligned = lg;
  out->logits.offset = 0;
  out->logits.sizes[0] = B;
  out->logits.sizes[1] = LB;
  out->logits.sizes[2] = V;
  out->logits.strides[0] = LB * V;
  out->logits.strides[1] = V;
  out->logits.strides[2] = 1;
}

/* A decode_tokens that calls the sampler only once (a broken kernel). */
void bt_entry_block_decode_tokens_short(void **argv) {
  struct {
    memref2i tokens;
    memref3f logits;
  } *out = argv[0];
  const memref2f *ctx = (const memref2f *)argv[2];
  const memref0i *sampler = (const memref0i *)argv[4];
  int64_t B = ctx->sizes[0];
  int64_t *tok = (int64_t *)calloc((size_t)(B * LB + 1), sizeof(int64_t));
  float *lg = (float *)calloc((size_t)(B * LB * V + 1), sizeof(float));
  memref2f lv = {lg, lg, 0, {B, V}, {LB * V, 1}};
  memref1i tv = {tok, tok, 0, {B}, {LB}};
  _mlir_ciface_bt_rt_sample(sampler->aligned[sampler->offset], &lv, &tv);
  out->tokens = (memref2i){tok, tok, 0, {B, LB}, {LB, 1}};
  out->logits = (memref3f){lg, lg, 0, {B, LB, V}, {LB * V, V, 1}};
}

/* ---- vanilla model ------------------------------------------------------ */

static void vanilla_append(const memref2i *ids, const memref2i *mask,
                           const memref2i *pos, const memref6f *kv,
                           const memref2i *valid, int64_t len) {
  for (int64_t b = 0; b < ids->sizes[0]; ++b)
    for (int64_t j = 0; j < ids->sizes[1]; ++j) {
      int64_t e = len + j;
      int64_t m = mask ? *i2_at(mask, b, j) : 1;
      *kv_at(kv, b, 0, e, 0) = (float)*i2_at(ids, b, j);
      *kv_at(kv, b, 0, e, 1) = (float)*i2_at(pos, b, j);
      *kv_at(kv, b, 1, e, 0) = (float)m;
      *kv_at(kv, b, 1, e, 1) = 1.0f;
      *i2_at(valid, b, e) = m;
    }
}

static void vanilla_logits(memref2f *out, float pk, const memref6f *kv,
                           const memref2i *valid, int64_t last) {
  int64_t B = kv->sizes[0];
  float *buf = (float *)malloc(sizeof(float) * (size_t)(B * V + 1));
  for (int64_t b = 0; b < B; ++b) {
    double sum = 0;
    int poisoned = 0;
    for (int64_t e = 0; e <= last; ++e) {
      if (*kv_at(kv, b, 1, e, 1) != 1.0f)
        poisoned = 1;
      if (*i2_at(valid, b, e))
        sum += (*kv_at(kv, b, 0, e, 0) + 1.0) * (*kv_at(kv, b, 0, e, 1) + 2.0);
    }
    int64_t target = ((int64_t)*kv_at(kv, b, 0, last, 0) + 1) % V;
    float sig = poisoned ? NAN : (float)fmod(sum + 3.0 * (double)last, 97.0) / 1000.0f;
    for (int64_t v = 0; v < V; ++v)
      buf[b * V + v] = (v == target ? pk : 0.0f) + sig;
  }
  out->allocated = out->aligned = buf;
  out->offset = 0;
  out->sizes[0] = B;
  out->sizes[1] = V;
  out->strides[0] = V;
  out->strides[1] = 1;
}

/* prefill(peak; input_ids [B, T], attention_mask [B, T], positions [B, T],
 *         kv_cache INOUT, kv_valid INOUT, cache_length) -> logits [B, V] */
void bt_entry_vanilla_prefill(void **argv) {
  const memref1f *peak = (const memref1f *)argv[1];
  const memref2i *ids = (const memref2i *)argv[2];
  const memref2i *mask = (const memref2i *)argv[3];
  const memref2i *pos = (const memref2i *)argv[4];
  const memref6f *kv = (const memref6f *)argv[5];
  const memref2i *valid = (const memref2i *)argv[6];
  const memref0i *len = (const memref0i *)argv[7];
  int64_t l = len->aligned[len->offset];
  vanilla_append(ids, mask, pos, kv, valid, l);
  vanilla_logits((memref2f *)argv[0], peak->aligned[peak->offset], kv, valid,
                 l + ids->sizes[1] - 1);
}

/* decode_step(peak; input_ids [B, 1], left_padding [B, 1], sampler,
 *             kv_cache INOUT, kv_valid INOUT, cache_length)
 *   -> tokens [B, 1] i64, logits [B, V] f32
 * The position of the new entry is cache_length - left_padding (the
 * generated entry point computes it so); the sampler picks the token. */
void bt_entry_vanilla_decode_step(void **argv) {
  struct {
    memref2i tokens;
    memref2f logits;
  } *out = argv[0];
  const memref1f *peak = (const memref1f *)argv[1];
  const memref2i *ids = (const memref2i *)argv[2];
  const memref2i *pad = (const memref2i *)argv[3];
  const memref0i *sampler = (const memref0i *)argv[4];
  const memref6f *kv = (const memref6f *)argv[5];
  const memref2i *valid = (const memref2i *)argv[6];
  const memref0i *len = (const memref0i *)argv[7];
  int64_t l = len->aligned[len->offset];
  int64_t B = ids->sizes[0];
  int64_t *p = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B + 1));
  for (int64_t b = 0; b < B; ++b)
    p[b] = l - *i2_at(pad, b, 0);
  memref2i pos = {p, p, 0, {B, 1}, {1, 1}};
  vanilla_append(ids, NULL, &pos, kv, valid, l);
  free(p);
  vanilla_logits(&out->logits, peak->aligned[peak->offset], kv, valid, l);
  int64_t *tok = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B + 1));
  memref1i tv = {tok, tok, 0, {B}, {1}};
  _mlir_ciface_bt_rt_sample(sampler->aligned[sampler->offset], &out->logits,
                            &tv);
  out->tokens.allocated = out->tokens.aligned = tok;
  out->tokens.offset = 0;
  out->tokens.sizes[0] = B;
  out->tokens.sizes[1] = 1;
  out->tokens.strides[0] = 1;
  out->tokens.strides[1] = 1;
}

/* ---- replay model --------------------------------------------------------
 * Replays recorded next-token logits (e.g. a fixture's official.step_logits)
 * through the block entry points, so that the runtime's loop, sampler and
 * EOS semantics can be compared with the recorded generation itself.
 * Params: replay.logits F32 [N, B0, V] (step, original row, vocab) and
 * replay.shape F32 [2] = {L_B, P}. Cache entry e of row b: k = (row id, e),
 * v = (number of prompt blocks, 1); decode_block copies the row id and the
 * prompt length from entry 0 of the row (so a row moved by compaction keeps
 * its identity only if its cache moved with it). Context = (row id, last
 * entry, prompt blocks, 0). decode_tokens step k of generated block g feeds
 * the sampler replay.logits[g * L_B + k, row id] (zeros past N).
 */

typedef struct {
  const memref3f *logits;
  int64_t lb;
} replay_params;

static replay_params replay_get(void **argv) {
  const memref3f *lg = (const memref3f *)argv[1];
  const memref1f *shape = (const memref1f *)argv[2];
  replay_params p = {lg, (int64_t)shape->aligned[shape->offset]};
  return p;
}

static void replay_context(memref2f *out, const memref6f *kv, int64_t last) {
  int64_t B = kv->sizes[0];
  float *buf = (float *)malloc(sizeof(float) * (size_t)(B * D + 1));
  for (int64_t b = 0; b < B; ++b) {
    buf[b * D + 0] = *kv_at(kv, b, 0, 0, 0);
    buf[b * D + 1] = (float)last;
    buf[b * D + 2] = *kv_at(kv, b, 1, 0, 0);
    buf[b * D + 3] = 0;
    for (int64_t e = 0; e <= last; ++e)
      if (*kv_at(kv, b, 0, e, 1) != (float)e || *kv_at(kv, b, 1, e, 1) != 1.0f ||
          *kv_at(kv, b, 0, e, 0) != buf[b * D + 0])
        buf[b * D + 0] = NAN;
  }
  out->allocated = out->aligned = buf;
  out->offset = 0;
  out->sizes[0] = B;
  out->sizes[1] = D;
  out->strides[0] = D;
  out->strides[1] = 1;
}

/* prefill(replay.logits, replay.shape; input_ids [B, N, L],
 *         block_attention_mask [B, N], kv INOUT, valid INOUT, cache_length) */
void bt_entry_replay_prefill(void **argv) {
  const memref3i *ids = (const memref3i *)argv[3];
  const memref2i *mask = (const memref2i *)argv[4];
  const memref6f *kv = (const memref6f *)argv[5];
  const memref2i *valid = (const memref2i *)argv[6];
  const memref0i *len = (const memref0i *)argv[7];
  int64_t l = len->aligned[len->offset], n = ids->sizes[1];
  for (int64_t b = 0; b < ids->sizes[0]; ++b)
    for (int64_t j = 0; j < n; ++j) {
      int64_t e = l + j;
      *kv_at(kv, b, 0, e, 0) = (float)b;
      *kv_at(kv, b, 0, e, 1) = (float)e;
      *kv_at(kv, b, 1, e, 0) = (float)(l + n);
      *kv_at(kv, b, 1, e, 1) = 1.0f;
      *i2_at(valid, b, e) = *i2_at(mask, b, j);
    }
  replay_context((memref2f *)argv[0], kv, l + n - 1);
}

/* decode_block(replay...; input_ids [B, 1, L], kv INOUT, valid INOUT,
 *              cache_length) */
void bt_entry_replay_decode_block(void **argv) {
  const memref3i *ids = (const memref3i *)argv[3];
  const memref6f *kv = (const memref6f *)argv[4];
  const memref2i *valid = (const memref2i *)argv[5];
  const memref0i *len = (const memref0i *)argv[6];
  int64_t e = len->aligned[len->offset];
  for (int64_t b = 0; b < ids->sizes[0]; ++b) {
    *kv_at(kv, b, 0, e, 0) = *kv_at(kv, b, 0, 0, 0);
    *kv_at(kv, b, 0, e, 1) = (float)e;
    *kv_at(kv, b, 1, e, 0) = *kv_at(kv, b, 1, 0, 0);
    *kv_at(kv, b, 1, e, 1) = 1.0f;
    *i2_at(valid, b, e) = 1;
  }
  replay_context((memref2f *)argv[0], kv, e);
}

/* decode_tokens(replay...; context [B, D], positions, sampler)
 *   -> tokens [B, L], step_logits [B, L, V] */
void bt_entry_replay_decode_tokens(void **argv) {
  struct {
    memref2i tokens;
    memref3f logits;
  } *out = argv[0];
  replay_params rp = replay_get(argv);
  const memref2f *ctx = (const memref2f *)argv[3];
  const memref0i *sampler = (const memref0i *)argv[5];
  int64_t B = ctx->sizes[0], L = rp.lb, N = rp.logits->sizes[0],
          B0 = rp.logits->sizes[1], Vr = rp.logits->sizes[2];
  int64_t *tok = (int64_t *)calloc((size_t)(B * L + 1), sizeof(int64_t));
  float *lg = (float *)calloc((size_t)(B * L * Vr + 1), sizeof(float));
  for (int64_t k = 0; k < L; ++k) {
    for (int64_t b = 0; b < B; ++b) {
      const float *c = ctx->aligned + ctx->offset + b * ctx->strides[0];
      float id = c[0], last = c[ctx->strides[1]], nprompt = c[2 * ctx->strides[1]];
      int64_t g = (int64_t)last - (int64_t)nprompt + 1, step = g * L + k;
      for (int64_t v = 0; v < Vr; ++v) {
        float x = 0.0f;
        if (isnan(id) || id < 0 || (int64_t)id >= B0)
          x = NAN;
        else if (step < N)
          x = rp.logits->aligned[rp.logits->offset + step * rp.logits->strides[0] +
                                 (int64_t)id * rp.logits->strides[1] +
                                 v * rp.logits->strides[2]];
        lg[(b * L + k) * Vr + v] = x;
      }
    }
    memref2f lv = {lg, lg, k * Vr, {B, Vr}, {L * Vr, 1}};
    memref1i tv = {tok, tok, k, {B}, {L}};
    _mlir_ciface_bt_rt_sample(sampler->aligned[sampler->offset], &lv, &tv);
  }
  out->tokens = (memref2i){tok, tok, 0, {B, L}, {L, 1}};
  out->logits = (memref3f){lg, lg, 0, {B, L, Vr}, {L * Vr, Vr, 1}};
}
