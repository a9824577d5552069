#!/usr/bin/env bash
# For every case folder of the official fixtures (whatever the folder holds):
# compile and evaluate it with bt-run through the generated CPU code, and check
# the outputs against the official ones (issue acceptance: logits max|Δ| <= 1e-4,
# loss relative error <= 1e-5). Fails if the folder holds no case.
#   check-fixtures.sh FIXTURES_DIR WORK_DIR [BT_RUN_FLAGS...]
# With --compare-variants as the first flag, every case is evaluated twice,
# with the token decoder's local attention fused into one kernel (the default,
# bt-fuse-local-attention) and unfused (--fuse-local-attention=false); both
# are checked against the official outputs and against each other (max|Δ|
# printed; they must agree to 1e-6).
set -euo pipefail
fixtures=$1
work=$2
shift 2
variants=0
if [ "${1:-}" = "--compare-variants" ]; then
  variants=1
  shift
fi
mkdir -p "$work"
n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  [ -f "$dir/inputs.safetensors" ] && [ -f "$dir/outputs.safetensors" ] || continue
  echo "== $case"
  bt-run eval "$dir" --inputs "$dir/inputs.safetensors" -o "$work/$case.safetensors" "$@"
  bt-launcher compare "$work/$case.safetensors" "$dir/outputs.safetensors" \
    --check logits:atol=1e-4 --check loss:rtol=1e-5
  if [ "$variants" -eq 1 ]; then
    echo "== $case, unfused local attention"
    bt-run eval "$dir" --inputs "$dir/inputs.safetensors" \
      -o "$work/$case.unfused.safetensors" --fuse-local-attention=false "$@"
    bt-launcher compare "$work/$case.unfused.safetensors" "$dir/outputs.safetensors" \
      --check logits:atol=1e-4 --check loss:rtol=1e-5
    echo "== $case, fused vs unfused"
    bt-launcher compare "$work/$case.safetensors" "$work/$case.unfused.safetensors" \
      --check logits:atol=1e-6 --check loss:rtol=1e-6
  fi
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case with inputs.safetensors and outputs.safetensors in $fixtures" >&2
  exit 1
fi
echo "checked $n fixture case(s)"
