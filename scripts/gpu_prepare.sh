#!/usr/bin/env bash
# Builds, on a build machine (LLVM/MLIR and the CUDA toolkit's libdevice +
# ptxas installed, no GPU needed), everything scripts/gpu_check.sh runs on the
# GPU box, into ONE directory, and packs it into BUNDLE_DIR.txz (xz), the file
# that travels there (the device tool's `carry`; at most 32 MiB, checked):
#
#   scripts/gpu_prepare.sh [BUNDLE_DIR] [FIXTURES_DIR]
#     BUNDLE_DIR    default build/gpu-bundle (replaced)
#     FIXTURES_DIR  default test/fixtures/official
#   BT_BUILD_DIR    the build directory with bin/bt-run and bin/bt-launcher
#                   (default build; run scripts/build.sh bt-run bt-launcher)
#   BT_GPU_BENCH    none (default) | tiny | paper: also compile the models of the
#                   GPU benchmark (issue 13 item 7; gpu_check.sh runs `bench` on
#                   each) into BUNDLE_DIR/bench/<model>.btart, `--target cuda`:
#                   tiny   block_tiny of FIXTURES_DIR (its trained weights; for the
#                          emulator and CI, BT_GPU_BENCH_SIZE=tiny);
#                   paper  block_main_b4_85 and block_main_b4_300 (bench/configs/,
#                          --random-init --seed 0 --seeded-weights: the artifacts
#                          store the seed and the runtime draws the 0.7 and 1.7 GB
#                          of f32 weights when it loads them, so they travel),
#                          block_main_b4_85_bf16 (the same b4_85 with --dtype
#                          bf16: GEMM weights and inputs in bf16),
#                          and BUNDLE_DIR/prof/ the prompts of gpu_profile.sh
#                          (p1x128, p256x2048: random ids of the Pythia vocabulary).
#
# The bundle holds
#   bt-launcher     the runtime (no LLVM/MLIR; stripped of debug info): it
#                   runs artifacts with `bt-launcher --artifact X.btart ...`;
#   <case>.btart    `bt-run compile <case> --target cuda --train --emit
#                   artifact` for every fixture case: host code, PTX kernels
#                   (sm_90), weights, manifest; the inference entry points and
#                   grad / train_step / apply_gradients;
#   <case>.bf16.btart  `bt-run compile <case> --target cuda --dtype bf16
#                   --emit artifact`: the inference entries in bf16 (issue 13
#                   item 2: bf16 GEMMs on tensor cores, the QKV bias in
#                   cuBLASLt's epilogue, bf16 activations and KV caches);
#   ptxas.txt       `ptxas -arch=sm_90` of every artifact's kernels, when
#                   ptxas is installed (the box has no toolkit to check it);
#   train/model.btart  block_train_tiny (test/bt-run/Inputs) with its tokenizer,
#                   for gpu_check.sh's training-loop checks;
#   BUNDLE.txt      the commit, the files and their sizes.
# The fixtures themselves are tracked files of the repository, so they are
# not copied. Standalone executables (`bt-run compile --target cuda -o model`,
# the launcher with the artifact appended) are the same code but each holds a
# copy of the ~33 MB launcher: the bundle keeps one launcher and the artifacts.
# Then, on the GPU box:  OUT=<dir> scripts/gpu_check.sh BUNDLE_DIR
set -euo pipefail

bundle=${1:-build/gpu-bundle}
fixtures=${2:-test/fixtures/official}
build=${BT_BUILD_DIR:-build}
limit=$((64 * 1024 * 1024))
btrun="$build/bin/bt-run"
launcher="$build/bin/bt-launcher"
for tool in "$btrun" "$launcher"; do
  if [ ! -x "$tool" ]; then
    echo "error: $tool not found (run BT_JOBS=1 scripts/build.sh bt-run bt-launcher)" >&2
    exit 1
  fi
done
if ldd "$launcher" | grep -Eq 'libLLVM|libMLIR'; then
  echo "error: $launcher links LLVM/MLIR; the GPU box has neither" >&2
  exit 1
fi

bench=${BT_GPU_BENCH:-none}
case "$bench" in
  none | tiny | paper) ;;
  *) echo "error: BT_GPU_BENCH=$bench: expected none, tiny or paper" >&2; exit 1 ;;
esac
configs="$(cd "$(dirname "$0")/.." && pwd)/bench/configs"

rm -rf "$bundle"
mkdir -p "$bundle"
strip --strip-debug -o "$bundle/bt-launcher" "$launcher"

ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  [ -f "$dir/model.safetensors" ] || continue
  case=$(basename "$dir")
  echo "== $case"
  "$btrun" compile "$dir" --target cuda --train --emit artifact -o "$bundle/$case.btart"
  # The same case in bf16 (inference only; gpu_check.sh's bf16 checks).
  "$btrun" compile "$dir" --target cuda --dtype bf16 --emit artifact -o "$bundle/$case.bf16.btart"
  if [ -x "$ptxas" ]; then
    "$btrun" compile "$dir" --target cuda --train --emit ptx -o "$bundle/$case.ptx"
    if "$ptxas" -arch=sm_90 "$bundle/$case.ptx" -o /dev/null 2> "$bundle/$case.ptxas.log"; then
      echo "$case: ptxas -arch=sm_90 OK" >> "$bundle/ptxas.txt"
    else
      echo "$case: ptxas -arch=sm_90 FAILED: $(grep -m1 error "$bundle/$case.ptxas.log")" >> "$bundle/ptxas.txt"
    fi
    rm -f "$bundle/$case.ptx" "$bundle/$case.ptxas.log"
  fi
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "error: no fixture case (with model.safetensors) in $fixtures" >&2
  exit 1
fi

# The training loop's artifact (gpu_check.sh's train checks): block_train_tiny
# with a 256-piece tokenizer of Genesis 1-25, compiled by `bt-run train` (one
# step on the emulator) with train_step and eval_loss.
repo="$(cd "$(dirname "$0")/.." && pwd)"
echo "== train: block_train_tiny"
work=$(mktemp -d)
"$btrun" train --config "$repo/test/bt-run/Inputs/block_train_tiny.yaml" \
  --data "$repo/runtime/test/data/kjv/genesis_1-25.txt" --split heading --holdout 0.08 \
  --vocab-size 256 --steps 1 --batch 2 --eval-every 0 --save-every 0 --no-plot \
  --progress none --target cuda --device cuda-emu -o "$work/run" > "$work/log" 2>&1 ||
  { cat "$work/log" >&2; rm -rf "$work"; exit 1; }
mkdir -p "$bundle/train"
cp "$work/run/model.btart" "$bundle/train/model.btart"
rm -rf "$work"

# The benchmark's models (BT_GPU_BENCH).
if [ "$bench" != none ]; then
  mkdir -p "$bundle/bench"
  if [ "$bench" = tiny ]; then
    echo "== bench: block_tiny"
    "$btrun" compile "$fixtures/block_tiny" --target cuda --dtype f32 --emit artifact \
      -o "$bundle/bench/block_tiny.btart"
  else
    # b4_85 with the training entry points too (gpu_check.sh's bench-train).
    for model in block_main_b4_85 block_main_b4_300; do
      echo "== bench: $model (random init)"
      train=()
      [ "$model" = block_main_b4_85 ] && train=(--train)
      "$btrun" compile --config "$configs/$model.yaml" --random-init --seed 0 \
        --seeded-weights --target cuda --dtype f32 "${train[@]}" --emit artifact \
        -o "$bundle/bench/$model.btart"
    done
    # b4_85 with --dtype bf16 (its GEMMs on tensor cores; the PyTorch
    # baseline runs in bf16 against it: bench.cc).
    echo "== bench: block_main_b4_85 --dtype bf16 (random init)"
    "$btrun" compile --config "$configs/block_main_b4_85.yaml" --random-init \
      --seed 0 --seeded-weights --target cuda --dtype bf16 --emit artifact \
      -o "$bundle/bench/block_main_b4_85_bf16.btart"
    # The prompts of scripts/gpu_profile.sh (the paper models' vocabulary).
    mkdir -p "$bundle/prof"
    prompt="$(dirname "$0")/../test/bt-run/Inputs/write_prompt.py"
    python3 "$prompt" "$bundle/prof/p1x128.safetensors" --batch 1 --tokens 128 --vocab 50304 --seed 1
    python3 "$prompt" "$bundle/prof/p256x2048.safetensors" --batch 256 --tokens 2048 --vocab 50304 --seed 2
  fi
fi

{
  echo "bt GPU bundle (scripts/gpu_prepare.sh), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "run on the GPU box: OUT=<dir> scripts/gpu_check.sh $bundle $fixtures"
  (cd "$bundle" && ls -l)
} > "$bundle/BUNDLE.txt"
# What travels: one xz archive of the bundle (BUNDLE_DIR.txz; the device
# tool carries at most 64 MiB with the repository's tracked files, about
# 30 MB). On the GPU box: tar -C "$(dirname BUNDLE_DIR)" -xJf BUNDLE_DIR.txz.
size=$(du -sb "$bundle" | cut -f1)
echo "bundle $bundle: $n artifact(s), $size bytes"
if [ -d "$bundle/bench" ]; then
  echo "benchmark models: $(du -sb "$bundle/bench" | cut -f1) bytes in $bundle/bench"
fi
tar -C "$(dirname "$bundle")" -cf - "$(basename "$bundle")" | xz -T2 -3 > "$bundle.txz.tmp"
mv "$bundle.txz.tmp" "$bundle.txz"
packed=$(stat -c %s "$bundle.txz")
echo "archive $bundle.txz: $packed bytes (carry it; unpack with tar -C $(dirname "$bundle") -xJf $bundle.txz)"
if [ "$packed" -gt $((limit - 32 * 1024 * 1024)) ]; then
  echo "error: $bundle.txz is $packed bytes: with the repository (~30 MB) over the 64 MiB a device call carries" >&2
  exit 1
fi
