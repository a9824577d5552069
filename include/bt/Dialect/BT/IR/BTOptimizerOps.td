//===- BTOptimizerOps.td - bt optimizer ops ----------------*- tablegen -*-===//
//
// Layer-level ops of one optimizer step (issue "Training"): the global
// gradient norm, the clip coefficient, the learning-rate schedule and the
// AdamW update. Included by BTOps.td. The numerics reference is the official
// training setup (HF Trainer 4.39.3 + DeepSpeed, conf/trainer/*.yaml,
// ds_configs/default_linear_warmup.config) and the fixtures' `adamw_step`
// (torch 1.13 `clip_grad_norm_` + single-tensor `AdamW`).
//
//===----------------------------------------------------------------------===//

#ifndef BT_OPTIMIZER_OPS_TD
#define BT_OPTIMIZER_OPS_TD

// `tensor<i64>` / `tensor<f32>` scalars that the assembly format can build
// (their types are not spelled in the custom syntax).
def BT_I64ScalarTensor : 0DTensorOf<[I64]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getI64Type())";
}
def BT_F32ScalarTensor : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}
def BT_F32Tensor : RankedTensorOf<[F32]>;

def BT_GlobalNormOp : BT_Op<"global_norm", [Pure]> {
  let summary = "Total L2 norm of a list of tensors (gradient clipping's norm)";
  let description = [{
    `norm = sqrt(Σ_t n_t²)` with `n_t = sqrt(Σ_i g_t[i]²)`, the 2-norm of the
    per-tensor 2-norms, as torch 1.13 `clip_grad_norm_(params, max_norm,
    norm_type=2)` computes `total_norm = norm(stack([norm(g) for g in
    grads]))`. Accumulation is in f32 (f16/bf16 elements are widened first),
    like PyTorch's vectorized f32 norm kernel; the order of the additions is
    not PyTorch's (see the lowering in bt-lower-to-linalg).

    - `tensors`: one or more float tensors of any shape (the gradients).
    - result: `tensor<f32>`.

    This is the pre-clip norm that training reports as `grad_norm`.

    Errors: no operand.

    Example:
    ```mlir
    %n = bt.global_norm %g0, %g1 : tensor<64xf32>, tensor<512x64xf32>
    ```
  }];
  let arguments = (ins Variadic<BT_FloatTensor>:$tensors);
  let results = (outs BT_F32ScalarTensor:$norm);
  let assemblyFormat = [{
    $tensors attr-dict `:` type($tensors)
  }];
  let hasVerifier = 1;
}

def BT_ClipCoefficientOp : BT_Op<"clip_coefficient", [Pure]> {
  let summary = "Gradient-clipping factor min(1, max_norm / (norm + eps))";
  let description = [{
    `coef = min(1, max_norm / (norm + eps))`, evaluated in f32 as torch 1.13
    `clip_grad_norm_` does (`clip_coef = max_norm / (total_norm + 1e-6)`,
    `clamp(clip_coef, max=1.0)`; the constants are rounded to f32). Every
    gradient is multiplied by it (`bt.adamw`'s `clip` operand), also when it
    is 1. The official setup clips at `max_norm` 1.0 (HF `max_grad_norm`,
    DeepSpeed `gradient_clipping: auto`).

    - `norm`: `tensor<f32>` (`bt.global_norm`); result: `tensor<f32>`.
    - `max_norm` > 0; `eps` ≥ 0 (default 1e-6, torch's).

    Errors: max_norm ≤ 0, eps < 0.

    Example:
    ```mlir
    %c = bt.clip_coefficient %n max_norm 1.000000e+00
    ```
  }];
  let arguments = (ins BT_F32ScalarTensor:$norm, F64Attr:$max_norm,
                       DefaultValuedAttr<F64Attr, "1e-6">:$eps);
  let results = (outs BT_F32ScalarTensor:$coefficient);
  let assemblyFormat = [{
    $norm `max_norm` $max_norm attr-dict
  }];
  let hasVerifier = 1;
}

def BT_LRScheduleOp : BT_Op<"lr_schedule", [Pure]> {
  let summary = "Learning rate of an optimizer step: linear warmup, cosine decay to a floor";
  let description = [{
    The learning rate used by optimizer step `step` (1-based) of the official
    training setup: HF Trainer 4.39.3 with DeepSpeed's `WarmupCosineLR`
    (`ds_configs/default_linear_warmup.config`: `warmup_type: linear`,
    `cos_min_ratio: 0.1`, `warmup_num_steps` = HF `warmup_steps` =
    `num_warmup_steps`, `total_num_steps` = HF `max_steps` =
    `num_train_steps` of `conf/trainer/*.yaml`), as the DeepSpeed engine
    drives it: the scheduler steps *after* each optimizer step, so step k
    runs with the scheduler's `last_batch_iteration` i = k − 2. With
    W = max(2, warmup_steps), T = total_steps, c = `cos_min_ratio`,
    w = `warmup_min_ratio`:

    ```
    ratio(i) = initial_ratio                                   i < 0 (step 1)
             = w + (1 − w) · i / W                             0 ≤ i < W
             = max(0, c + (1 − c) · (1 + cos(π · p)) / 2),     i ≥ W
               p = min(1, (i − W + 1) / max(1, T − W))
    lr = peak_lr · ratio(step − 2)
    ```

    computed in f64 (as Python floats) and rounded to f32. `initial_ratio`
    is the ratio of step 1, which DeepSpeed never computes: up to
    DeepSpeed 0.15.2 (the releases of the paper's training period,
    `WarmupCosineLR.__init__` does not touch the optimizer) step 1 runs at
    the optimizer's initial lr, `peak_lr` (1.0, the default); DeepSpeed ≥
    0.15.3 (#6597, "Add first Step in LR Schedulers") sets it to
    `get_lr()` at iteration −1, i.e. 0. The clamp of `p` to 1 is that of
    current DeepSpeed; 0.14 lets the cosine rise again after T (the
    official runs stop at T). The floor is c · peak_lr (10%, "following
    Pythia", ds_configs/README.md).

    - `step`, `warmup_steps`, `total_steps`: `tensor<i64>`; `peak_lr`:
      `tensor<f32>`; result: `tensor<f32>`.

    Errors: a ratio attribute outside [0, 1].

    Example:
    ```mlir
    %lr = bt.lr_schedule %step, %peak, %warmup, %total
    %lr0 = bt.lr_schedule %step, %peak, %warmup, %total {initial_ratio = 0.0 : f64}
    ```
  }];
  let arguments = (ins BT_I64ScalarTensor:$step, BT_F32ScalarTensor:$peak_lr,
                       BT_I64ScalarTensor:$warmup_steps,
                       BT_I64ScalarTensor:$total_steps,
                       DefaultValuedAttr<F64Attr, "0.1">:$cos_min_ratio,
                       DefaultValuedAttr<F64Attr, "0.0">:$warmup_min_ratio,
                       DefaultValuedAttr<F64Attr, "1.0">:$initial_ratio);
  let results = (outs BT_F32ScalarTensor:$lr);
  let assemblyFormat = [{
    $step `,` $peak_lr `,` $warmup_steps `,` $total_steps attr-dict
  }];
  let hasVerifier = 1;
}

def BT_AdamWOp : BT_Op<"adamw", [Pure,
    AllTypesMatch<["param", "exp_avg", "exp_avg_sq", "new_param",
                   "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "One AdamW step of one parameter tensor (torch 1.13 single-tensor AdamW)";
  let description = [{
    Elementwise, exactly the order of operations of torch 1.13
    `torch.optim._functional._single_tensor_adamw` (`amsgrad=False`,
    `maximize=False`, `capturable=False`) after `clip_grad_norm_`, with the
    scalars computed in f64 (Python floats) and rounded to f32 where PyTorch
    passes them to an f32 tensor op, and every tensor operation rounded to
    f32. With `t = step` (the step count after this step's increment,
    1-based), `lr`, `clip` (`bt.clip_coefficient`):

    ```
    g  = grad · clip                          clip_grad_norm_: g.mul_(clip_coef_clamped)
    p  = p · f32(1 − lr·wd)                    param.mul_(1 - lr * weight_decay)
    m  = m · f32(β1) + f32(1 − β1) · g         exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    v  = v · f32(β2) + (f32(1 − β2) · g) · g   exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    d  = sqrt(v) / f32(sqrt(1 − β2^t)) + f32(eps)
    p  = p + f32(−lr / (1 − β1^t)) · (m / d)   param.addcdiv_(exp_avg, denom, value=-step_size)
    ```

    Weight decay applies to every parameter it is given (the official
    setup puts all parameters in one group: HF's DeepSpeed integration
    passes `model.parameters()` to DeepSpeed's AdamW; a parameter without
    gradient is not given to it at all). Embedding rows with a zero gradient
    get weight decay only (m = v = 0 there, so the update is 0 / eps).

    The official runs used DeepSpeed's fused AdamW (`adam_w_mode`), which is
    the same formula up to rounding (`(m/bc1) / (sqrt(v/bc2) + eps) + wd·p`
    scaled by lr); this op matches the fixtures' torch step.

    - `param`, `exp_avg` (m), `exp_avg_sq` (v): f32, same type; `grad`:
      float of the same shape; `lr`, `clip`: `tensor<f32>`; `step`:
      `tensor<i64>` (≥ 1).
    - results: the new param, m and v (same type as `param`). With the
      results written into the operands' buffers, bufferization updates
      parameters and moments in place (`bt-generate-train-step`).
    - `beta1`, `beta2` in [0, 1); `eps` ≥ 0; `weight_decay` ≥ 0.

    Errors: grad shape ≠ param shape, a hyper-parameter out of range.

    Example:
    ```mlir
    %p1, %m1, %v1 = bt.adamw %p, %g, %m, %v lr %lr step %t clip %c
        beta1 9.000000e-01 beta2 9.500000e-01 eps 1.000000e-08 weight_decay 1.000000e-01
        : tensor<64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins BT_F32Tensor:$param, BT_FloatTensor:$grad,
                       BT_F32Tensor:$exp_avg, BT_F32Tensor:$exp_avg_sq,
                       BT_F32ScalarTensor:$lr, BT_I64ScalarTensor:$step,
                       BT_F32ScalarTensor:$clip, F64Attr:$beta1,
                       F64Attr:$beta2, F64Attr:$eps, F64Attr:$weight_decay);
  let results = (outs BT_F32Tensor:$new_param, BT_F32Tensor:$new_exp_avg,
                      BT_F32Tensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `lr` $lr `step` $step
    `clip` $clip `beta1` $beta1 `beta2` $beta2 `eps` $eps `weight_decay`
    $weight_decay attr-dict `:` type($param) `,` type($grad)
  }];
  let hasVerifier = 1;
}

#endif // BT_OPTIMIZER_OPS_TD
