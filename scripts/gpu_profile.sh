#!/usr/bin/env bash
# Per-kernel GPU times of one generation with Nsight Compute, on the GPU
# machine (device tool), for the decode-step breakdown in
# docs/gpu-runs/: every kernel launch (bt's PTX kernels and cuBLAS's) with
# its duration, as CSV.
#
#   scripts/gpu_profile.sh ARTIFACT PROMPT.safetensors NEW_TOKENS OUT.csv
#     ARTIFACT            a --target cuda artifact (bt-launcher beside it in
#                         $BT_LAUNCHER, default build/gpu-bundle/bt-launcher)
#     PROMPT.safetensors  prompt.input_ids [B, T] (+ prompt.attention_mask)
#     NEW_TOKENS          tokens to generate (greedy, EOS ignored)
#     OUT.csv             ncu --csv output (metric gpu__time_duration.sum, ns)
#   ncu is $NCU, else the one on PATH or under /usr/local/cuda or
#   /opt/nvidia. scripts/ncu_summary.py folds the CSV per kernel name.
set -uo pipefail
artifact=$1 prompt=$2 tokens=$3 csv=$4
launcher=${BT_LAUNCHER:-build/gpu-bundle/bt-launcher}
ncu=${NCU:-$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)}
if [ -z "$ncu" ]; then
  echo "error: no ncu (Nsight Compute) found" >&2
  exit 2
fi
# The generated tokens go to a fresh temporary directory (not a fixed path
# that could name someone's file), removed at exit.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$ncu" --metrics gpu__time_duration.sum --csv \
  "$launcher" --artifact "$artifact" generate --device cuda --inputs "$prompt" \
  --max-new-tokens "$tokens" --greedy --ignore-eos --no-step-logits \
  -o "$scratch/out.safetensors" > "$csv"
