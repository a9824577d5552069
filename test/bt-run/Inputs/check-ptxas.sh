#!/usr/bin/env bash
# The CI check of the CUDA target without a GPU (issue 6): for every case
# folder of the official fixtures (whatever the folder holds) and for
# bench/configs/block_main_b4_85.yaml (--random-init), generate the kernels
# with `bt-run compile --target cuda --emit ptx` and assemble them with
# `ptxas -arch=sm_90`. Prints the number of kernels (.entry) per case. Fails
# if a compile or an assembly fails, ptxas prints anything (a warning or an
# info line), a module has no kernel, or the folder holds no case.
#   check-ptxas.sh PTXAS FIXTURES_DIR CONFIG_DIR WORK_DIR [BT_RUN_FLAGS...]
set -euo pipefail
ptxas=$1
fixtures=$2
configs=$3
work=$4
shift 4
mkdir -p "$work"

assemble() { # name ptx
  local name=$1 ptx=$2
  # ptxas prints nothing for our kernels: no warning, and no "potential out
  # of bound access" info since the dynamic shared memory is `.extern
  # .shared` as CUDA declares it (bt-gpu-extern-shared-memory).
  local said
  said=$("$ptxas" -arch=sm_90 "$ptx" -o "$work/$name.cubin" 2>&1)
  if [ -n "$said" ]; then
    echo "FAIL $name: ptxas printed:" >&2
    echo "$said" | head -5 >&2
    exit 1
  fi
  local kernels
  kernels=$(grep -c '^\.visible \.entry' "$ptx" || true)
  if [ "$kernels" -eq 0 ]; then
    echo "FAIL $name: no kernel in $ptx" >&2
    exit 1
  fi
  echo "$name: $kernels kernels, ptxas -arch=sm_90 OK"
}

n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  [ -f "$dir/model.safetensors" ] || continue
  bt-run compile "$dir" --target cuda --emit ptx -o "$work/$case.ptx" "$@"
  assemble "$case" "$work/$case.ptx"
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case with model.safetensors in $fixtures" >&2
  exit 1
fi
bt-run compile --config "$configs/block_main_b4_85.yaml" --random-init \
  --target cuda --emit ptx -o "$work/block_main_b4_85.ptx" "$@"
assemble block_main_b4_85 "$work/block_main_b4_85.ptx"
echo "assembled $((n + 1)) module(s)"
