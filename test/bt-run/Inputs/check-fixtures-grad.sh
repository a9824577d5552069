#!/usr/bin/env bash
# For every case folder of the official fixtures (whatever the folder holds):
# compute the loss and the parameter gradients with `bt-run grad` (import →
# bt-decompose → bt-generate-gradients → bt-cpu-pipeline → shared object →
# artifact → runtime) and check them against the official ones (issue
# acceptance: every grad.<param> within max|Δ| / max|ref| <= 1e-4, loss
# relative error <= 1e-5). A checkpoint tensor that the model never reads
# (block_decoder.gpt_neox.embed_in.weight, the fixtures' params_without_grad)
# has no grad output; its reference must then be all zeros (--absent-as-zero).
# Fails if the folder holds no case.
#   check-fixtures-grad.sh FIXTURES_DIR WORK_DIR [BT_RUN_FLAGS...]
set -euo pipefail
fixtures=$1
work=$2
shift 2
mkdir -p "$work"
n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  [ -f "$dir/inputs.safetensors" ] && [ -f "$dir/outputs.safetensors" ] || continue
  echo "== $case"
  bt-run grad "$dir" --inputs "$dir/inputs.safetensors" -o "$work/$case.grad.safetensors" "$@"
  bt-launcher compare "$work/$case.grad.safetensors" "$dir/outputs.safetensors" \
    --absent-as-zero --check 'grad.*:rtol=1e-4' --check loss:rtol=1e-5
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case with inputs.safetensors and outputs.safetensors in $fixtures" >&2
  exit 1
fi
echo "checked $n fixture case(s)"
