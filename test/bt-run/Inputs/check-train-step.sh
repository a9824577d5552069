#!/usr/bin/env bash
# For every case folder of the official fixtures with adamw_step.safetensors:
# one optimizer step with bt-run train-step (docs/training.md), compared with
# the official step (torch 1.13 clip_grad_norm_(1.0) + AdamW(lr 1e-3,
# betas (0.9, 0.95), eps 1e-8, weight_decay 0.1) from model.safetensors).
#   check-train-step.sh FIXTURES_DIR WORK_DIR apply|train|exe|cuda-emu
# apply: apply_gradients on the stored gradients (outputs.safetensors,
#   grad.*), every element of every tensor within 2e-7 of adamw_step, and
#   grad_norm = grad_norm_preclip (relative 1e-6).
# train: train_step on inputs.safetensors (gradients by the compiled
#   backward): max|Δ| <= 1e-6 on elements whose clipped stored gradient
#   |grad·C| exceeds 1e-6 (C = min(1, 1/(grad_norm_preclip + 1e-6))), <= 2e-4
#   on the others (where AdamW's step-1 update lr·g/(|g|+eps) is
#   ill-conditioned; fixtures README), loss and grad_norm against the
#   official ones.
# exe: as train, through a standalone executable (bt-run compile --train
#   --emit executable; ./model train-step --checkpoint DIR ...), whose
#   kernels target x86-64-v3 rather than this machine's CPU. Elements with
#   |grad·C| <= 1e-6 are checked at 2e-4 (issue 16 acceptance): their update
#   lr·u/(|u|+1e-8) amplifies a gradient difference by up to lr/eps = 1e5,
#   and f32 summation order (vector width, OpenBLAS kernel) moves a 7e-9
#   gradient by 2e-9; measured 6.6e-5 on one element of vanilla_tiny with
#   OpenBLAS's auto-detected core on an AMD EPYC (the README measured 2.4e-5
#   between two torch runs). The update itself is at most lr = 1e-3.
# cuda-emu: as train, through ONE `--target cuda --train` artifact per case
#   (bt-run compile; grad, train_step and apply_gradients lowered by
#   bt-cuda-pipeline) run on the CUDA emulator (bt-launcher --device
#   cuda-emu, docs/cuda-emulator.md): first its grad entry against the
#   fixture gradients (every grad.* max|Δ| / max|ref| <= 1e-4, loss
#   relative 1e-5, as fixtures-grad.test), then train-step as above; any
#   emulator report ("bt cuda-emu:" on stderr) fails.
# All: the output directory holds config.yaml (identical to the
# checkpoint's) and every official tensor (the unused block-decoder embed_in
# unchanged). Fails if the folder holds no such case.
set -euo pipefail
fixtures=$1
work=$2
mode=$3
mkdir -p "$work"

# scalar NAME FILE: the value of a scalar F32 tensor.
scalar() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
name, path = sys.argv[1:]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
    e = h[name]
    assert e["dtype"] == "F32" and e["shape"] == [], e
    f.seek(8 + n + e["data_offsets"][0])
    print(repr(struct.unpack("<f", f.read(4))[0]))
PY
}

# has TENSOR FILE: the safetensors header of FILE names TENSOR.
has() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
name, path = sys.argv[1:]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    sys.exit(0 if name in json.loads(f.read(n)) else 1)
PY
}

# emu LOG CMD...: CMD on the CUDA emulator; fails on any emulator report.
source "$(dirname "$0")/cuda-emu-run.sh"

n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  [ -f "$dir/adamw_step.safetensors" ] && [ -f "$dir/outputs.safetensors" ] || continue
  echo "== $case ($mode)"
  out="$work/$case.$mode"
  if [ "$mode" = apply ]; then
    bt-run train-step "$dir" --grads "$dir/outputs.safetensors" --lr 1e-3 \
      -o "$out" --step-outputs "$work/$case.$mode.outputs.safetensors"
    bt-launcher compare "$work/$case.$mode.outputs.safetensors" "$dir/outputs.safetensors" \
      --check grad_norm=grad_norm_preclip:rtol=1e-6
    bt-launcher compare "$out/model.safetensors" "$dir/adamw_step.safetensors" \
      --check '*:atol=2e-7'
  else
    lo_tol=2e-4
    norm=$(scalar grad_norm_preclip "$dir/outputs.safetensors")
    clip=$(python3 -c "print(repr(min(1.0, 1.0 / ($norm + 1e-6))))")
    echo "clip coefficient $clip"
    if [ "$mode" = cuda-emu ]; then
      bt-run compile "$dir" --target cuda --train --emit artifact \
        -o "$work/$case.cuda.btart"
      emu "$work/$case.grad.log" bt-launcher --artifact "$work/$case.cuda.btart" \
        grad --inputs "$dir/inputs.safetensors" -o "$work/$case.grad.safetensors"
      cat "$work/$case.grad.log"
      bt-launcher compare "$work/$case.grad.safetensors" "$dir/outputs.safetensors" \
        --absent-as-zero --check 'grad.*:rtol=1e-4' --check loss:rtol=1e-5
      emu "$work/$case.step.log" bt-launcher --artifact "$work/$case.cuda.btart" \
        train-step --checkpoint "$dir" --inputs "$dir/inputs.safetensors" \
        --lr 1e-3 -o "$out" --step-outputs "$work/$case.$mode.outputs.safetensors"
      cat "$work/$case.step.log"
    elif [ "$mode" = exe ]; then
      bt-run compile "$dir" --train --grad-entry=false --emit executable \
        -o "$work/$case.model"
      "$work/$case.model" train-step --checkpoint "$dir" \
        --inputs "$dir/inputs.safetensors" --lr 1e-3 -o "$out" \
        --step-outputs "$work/$case.$mode.outputs.safetensors"
    else
      bt-run train-step "$dir" --inputs "$dir/inputs.safetensors" --lr 1e-3 \
        -o "$out" --step-outputs "$work/$case.$mode.outputs.safetensors"
    fi
    bt-launcher compare "$work/$case.$mode.outputs.safetensors" "$dir/outputs.safetensors" \
      --check loss:rtol=1e-5 --check grad_norm=grad_norm_preclip:rtol=1e-5
    bt-launcher compare "$out/model.safetensors" "$dir/adamw_step.safetensors" \
      --mask-file "$dir/outputs.safetensors" \
      --check "*:atol=1e-6,where=|grad.{}|*$clip>1e-6" \
      --check "*:atol=$lo_tol,where=|grad.{}|*$clip<=1e-6"
  fi
  cmp "$out/config.yaml" "$dir/config.yaml"
  # The unused tensor is copied through (the '*' checks above already
  # required every official name in the output).
  unused=block_decoder.gpt_neox.embed_in.weight
  if has "$unused" "$dir/model.safetensors"; then
    bt-launcher compare "$out/model.safetensors" "$dir/model.safetensors" \
      --check "$unused:equal"
  fi
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case with adamw_step.safetensors in $fixtures" >&2
  exit 1
fi
echo "checked $n fixture case(s)"
