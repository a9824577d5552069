#!/usr/bin/env bash
# For every case folder of the official fixtures (whatever the folder holds):
# compile and evaluate it with bt-run through the generated CPU code, and check
# the outputs against the official ones (issue acceptance: logits max|Δ| <= 1e-4,
# loss relative error <= 1e-5). Fails if the folder holds no case.
#   check-fixtures.sh FIXTURES_DIR WORK_DIR
set -euo pipefail
fixtures=$1
work=$2
mkdir -p "$work"
n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  [ -f "$dir/inputs.safetensors" ] && [ -f "$dir/outputs.safetensors" ] || continue
  echo "== $case"
  bt-run eval "$dir" --inputs "$dir/inputs.safetensors" -o "$work/$case.safetensors"
  bt-launcher compare "$work/$case.safetensors" "$dir/outputs.safetensors" \
    --check logits:atol=1e-4 --check loss:rtol=1e-5
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case with inputs.safetensors and outputs.safetensors in $fixtures" >&2
  exit 1
fi
echo "checked $n fixture case(s)"
