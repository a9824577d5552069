#!/usr/bin/env bash
# For every case folder of the official fixtures with generate.safetensors
# (and generate_eos.safetensors): compile it with bt-run, generate greedily
# through the compiled entry points (docs/generation.md) and compare with the
# official outputs: new_tokens equal, step_logits max|Δ| <= 1e-4.
#   - trainpos.* (block cases): default, training token-decoder positions;
#   - official.*: --official-generate-positions (ignored by vanilla models,
#     whose positions are HF's); generate_eos.safetensors has official.* only
#     and checks the official EOS semantics (finished rows padded, step
#     logits 0).
# Fails if the folder holds no such case.
#   check-generate.sh FIXTURES_DIR WORK_DIR
set -euo pipefail
fixtures=$1
work=$2
mkdir -p "$work"

# has TENSOR FILE: the safetensors header of FILE names TENSOR.
# dim1 TENSOR FILE: dim 1 of TENSOR.
st_header_py="$(cd "$(dirname "$0")/../../.." && pwd)/scripts/safetensors_header.py"
header() { python3 "$st_header_py" "$@"; }

n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  artifact=
  for gen in "$dir/generate.safetensors" "$dir/generate_eos.safetensors"; do
    [ -f "$gen" ] || continue
    if [ -z "$artifact" ]; then
      artifact="$work/$case.btart"
      bt-run compile "$dir" --emit artifact -o "$artifact"
    fi
    file=$(basename "$gen" .safetensors)
    tokens=$(header dim1 official.new_tokens "$gen")
    modes=official
    if header has trainpos.new_tokens "$gen"; then
      modes="trainpos official"
    fi
    for mode in $modes; do
      flags=
      [ "$mode" = official ] && flags=--official-generate-positions
      echo "== $case $file $mode"
      out="$work/$case.$file.$mode.safetensors"
      bt-run generate "$artifact" --inputs "$gen" --max-new-tokens "$tokens" --greedy \
        $flags -o "$out"
      bt-launcher compare "$out" "$gen" \
        --check "new_tokens=$mode.new_tokens:equal" \
        --check "step_logits=$mode.step_logits:atol=1e-4"
      n=$((n + 1))
    done
  done
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case with generate.safetensors in $fixtures" >&2
  exit 1
fi
echo "checked $n generate fixture(s)"
