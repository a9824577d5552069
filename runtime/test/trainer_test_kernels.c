/*===- trainer_test_kernels.c - a fake model with the training entry points --===*
 *
 * A kernel library written by hand that implements train_step and
 * apply_gradients of docs/training.md through the ABI of docs/abi.md for a
 * toy model with two parameters, w F32[3] and b F32[2], so that the runtime's
 * Trainer (in-out parameter and moment buffers, the step counter and the
 * schedule scalars) is tested for real. Toy semantics (not AdamW):
 *
 *   train_step(x F32[N, 3], step, peak_lr, warmup_steps, total_steps, state):
 *     g.w[j] = sum_n x[n, j], g.b = (1, 2),
 *     loss = sum_n sum_j x[n, j] * w[j] + b[0] (before the update)
 *   apply_gradients(grad.w, grad.b, step, peak_lr, warmup_steps, total_steps,
 *                   state): g = the given gradients
 *   both: lr = peak_lr * step + warmup_steps + 1000 * total_steps,
 *     grad_norm = sum |g|, and for every element
 *     m += g, v += g * g, p -= lr * g.
 *
 *===----------------------------------------------------------------------===*/

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
  float *allocated, *aligned;
  int64_t offset;
} memref0f;
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

int32_t bt_kernel_abi_version(void) { return 1; }

static memref0f scalar(float v) {
  float *p = malloc(sizeof(float));
  *p = v;
  memref0f r = {p, p, 0};
  return r;
}

/* argv[first..]: step, peak_lr, warmup_steps, total_steps, then param.w,
 * param.b, adam_m.w, adam_m.b, adam_v.w, adam_v.b. Returns lr and the norm. */
static void update(void **argv, int first, const float *gw, const float *gb,
                   float *lr_out, float *norm_out) {
  int64_t step = ((memref0i *)argv[first])->aligned[0];
  float peak = ((memref0f *)argv[first + 1])->aligned[0];
  int64_t warmup = ((memref0i *)argv[first + 2])->aligned[0];
  int64_t total = ((memref0i *)argv[first + 3])->aligned[0];
  float lr = peak * (float)step + (float)warmup + 1000.0f * (float)total;
  float *p[2], *m[2], *v[2];
  for (int k = 0; k < 2; ++k) {
    p[k] = ((memref1f *)argv[first + 4 + k])->aligned;
    m[k] = ((memref1f *)argv[first + 6 + k])->aligned;
    v[k] = ((memref1f *)argv[first + 8 + k])->aligned;
  }
  const float *g[2] = {gw, gb};
  const int n[2] = {3, 2};
  float norm = 0;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < n[k]; ++j) {
      norm += fabsf(g[k][j]);
      m[k][j] += g[k][j];
      v[k][j] += g[k][j] * g[k][j];
      p[k][j] -= lr * g[k][j];
    }
  *lr_out = lr;
  *norm_out = norm;
}

void bt_entry_train_step(void **argv) {
  memref0f *out = (memref0f *)argv[0];
  memref2f *x = (memref2f *)argv[1];
  const float *w = ((memref1f *)argv[6])->aligned;
  const float *b = ((memref1f *)argv[7])->aligned;
  float gw[3] = {0, 0, 0}, gb[2] = {1, 2}, loss = b[0];
  for (int64_t i = 0; i < x->sizes[0]; ++i)
    for (int j = 0; j < 3; ++j) {
      float xv = x->aligned[x->offset + i * x->strides[0] + j * x->strides[1]];
      gw[j] += xv;
      loss += xv * w[j];
    }
  float lr, norm;
  update(argv, 2, gw, gb, &lr, &norm);
  out[0] = scalar(loss);
  out[1] = scalar(norm);
  out[2] = scalar(lr);
}

void bt_entry_apply_gradients(void **argv) {
  memref0f *out = (memref0f *)argv[0];
  const float *gw = ((memref1f *)argv[1])->aligned;
  const float *gb = ((memref1f *)argv[2])->aligned;
  float lr, norm;
  update(argv, 3, gw, gb, &lr, &norm);
  out[0] = scalar(norm);
  out[1] = scalar(lr);
}
