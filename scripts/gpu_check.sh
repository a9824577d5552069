#!/usr/bin/env bash
# GPU checks of the CUDA target (issue 6, item 5), meant to run ON the GPU box
# (H100/H200: CUDA driver, cuBLAS, python3; no LLVM/MLIR) in ONE call, on the
# bundle that scripts/gpu_prepare.sh built on a build machine:
#
#   scripts/gpu_check.sh [BUNDLE_DIR] [FIXTURES_DIR]
#     BUNDLE_DIR    default build/gpu-bundle (bt-launcher + <case>.btart, one
#                   `--target cuda` artifact per fixture case)
#     FIXTURES_DIR  default test/fixtures/official (in the repository)
#   Results go to $OUT (default ./gpu-check-out), all text/CSV:
#     summary.csv   case,check,status,detail,seconds (status OK|FAIL|SKIP)
#     devices.txt   `bt-launcher devices` (+ nvidia-smi when present)
#     <case>.<check>.txt  the full output of every command
#
# For every fixture case (docs/codegen-cuda.md, "Checks on a GPU machine"):
#   eval      fp32 forward on the GPU: logits and loss vs outputs.safetensors,
#             max|Δ| <= 1e-3 (issue 6);
#   generate  greedy generation vs generate.safetensors (and
#             generate_eos.safetensors): new_tokens equal, step_logits
#             max|Δ| <= 1e-3 — block cases with the training token-decoder
#             positions (trainpos.*) and --official-generate-positions
#             (official.*), vanilla against official.*; and the same
#             generation with BT_CUDA_GRAPHS=0 bit-identical to the one
#             that replays decode_tokens and decode_block (vanilla:
#             decode_step) as CUDA graphs;
#   grad, train-step (cases with adamw_step.safetensors; artifacts compiled
#             with --train): the grad entry vs the fixture gradients (every
#             grad.* max|Δ| / max|ref| <= 1e-4, loss relative 1e-5) and one
#             train-step vs adamw_step (max|Δ| <= 1e-6 where |grad·clip| >
#             1e-6, issue 13's bound; loss and grad_norm relative 1e-5), as
#             test/bt-run/cuda-emu-train.test on the emulator. Elsewhere
#             AdamW's step-1 update lr·g/(|g| + eps) turns the GPU's other
#             summation order into any value in [-lr, lr] (fixtures README;
#             2.1e-4 on the H100, 2026-11-27), so those elements are only
#             held to 2.2e-3 (two updates of at most 1.1e-3); the optimizer
#             itself is checked on every element by adamw-apply: train-step
#             --grads on the fixture's stored gradients vs adamw_step,
#             max|Δ| <= 2e-7 (as test/bt-run/apply-gradients.test on the CPU);
#   bf16      the case's `--dtype bf16` artifact (<case>.bf16.btart): eval
#             and a greedy generation of generate.safetensors (12 tokens)
#             held to bench/bt_torch.py's bf16 reference (--check-bf16-gemms,
#             --check-bf16-generate, as test/bt-run/cuda-emu-bf16.test on the
#             emulator): every position within 2^-7 of max|logit| of it and
#             eval within 2^-6 of the f32 fixture, the greedy tokens equal;
#             on a GPU with --min-exact 0 (BT_GPU_BF16_MIN_EXACT), as cuBLAS
#             sums in another order than the reference's double sums, so a
#             rounding flip may move more positions than the emulator's 10 %
#             (the share within 1e-5 is reported). Needs torch ($BT_PYTHON,
#             default python3 on a GPU, /usr/bin/python3 on the emulator);
#   memcheck  compute-sanitizer --tool memcheck on eval and one generate, when
#             /usr/local/cuda/bin/compute-sanitizer (or $COMPUTE_SANITIZER)
#             exists.
# Then the GPU benchmark (issue 13 item 7; docs/codegen-cuda.md, "The GPU
# benchmark"), for every BUNDLE_DIR/bench/<model>.btart (gpu_prepare.sh with
# BT_GPU_BENCH=tiny|paper): `bt-launcher --artifact <model>.btart bench` on the
# device with the PyTorch baseline (bench/bt_torch.py) on the same GPU, in
# f32 as bt's artifacts (on the emulator torch runs on the CPU: there is no
# GPU), into $OUT/bench.<model>.csv and bench.<model>.txt, and the Pareto plot
# of all of them, $OUT/bench_pareto.png (matplotlib or gnuplot) and .svg
# (bench/pareto_plot.py). BT_GPU_BENCH_SIZE selects the sizes:
#   paper (default) the paper's settings, prefill-heavy 2048/128 and
#                   decode-heavy 128/2048, batch 1, 32, 256 and the planned max
#                   batch (for the GPU's memory from nvidia-smi; the batches
#                   are BT_GPU_BENCH_BATCHES, default 1,32,256,max), --warmup 1
#                   --iters 2 (BT_GPU_BENCH_ITERS);
#   tiny            prefill-heavy 8/4, decode-heavy 4/8, batch 1 and 2, one
#                   call each: what the emulator finishes in seconds.
# BT_GPU_BENCH_TIMEOUT (default 1800) bounds each model's bench command;
# BT_GPU_BENCH_BASELINE=none skips PyTorch; $BT_PYTHON is the interpreter
# with torch (default: python3 on a GPU, bench's /usr/bin/python3 on the
# emulator).
# With BT_DEVICE=cuda-emu the same checks run on the CUDA emulator
# (docs/cuda-emulator.md; any emulator report fails the command).
# Every command runs under `timeout` (BT_GPU_CHECK_TIMEOUT seconds, default
# 120) so that one hanging kernel cannot eat the device call. Exits 0 when
# every check passed, 1 otherwise (the files are written either way), 2 for a
# bad bundle.
set -uo pipefail

bundle=${1:-build/gpu-bundle}
fixtures=${2:-test/fixtures/official}
out=${OUT:-./gpu-check-out}
limit=${BT_GPU_CHECK_TIMEOUT:-120}
sanitizer=${COMPUTE_SANITIZER:-/usr/local/cuda/bin/compute-sanitizer}
mkdir -p "$out"
launcher="$bundle/bt-launcher"
if [ ! -x "$launcher" ]; then
  echo "error: $launcher: no bt-launcher in the bundle (run scripts/gpu_prepare.sh on the build machine)" >&2
  exit 2
fi
if [ ! -d "$fixtures" ]; then
  echo "error: $fixtures: no fixtures directory" >&2
  exit 2
fi

summary="$out/summary.csv"
echo "case,check,status,detail,seconds" > "$summary"
failures=0
record() { # case check status detail seconds
  echo "$1,$2,$3,\"$4\",$5" >> "$summary"
  printf '%-14s %-34s %-4s %s\n' "$1" "$2" "$3" "$4"
  [ "$3" = FAIL ] && failures=$((failures + 1))
  return 0
}
# run CASE CHECK CMD...: runs CMD (output to $out/CASE.CHECK.txt), records
# OK/FAIL with the last line that mentions FAIL/error, else the last line.
run() {
  local case=$1 check=$2
  shift 2
  local log="$out/$case.$check.txt" start end rc detail
  start=$(date +%s.%N)
  { echo "\$ $*"; timeout "$limit" "$@"; } > "$log" 2>&1
  rc=$?
  end=$(date +%s.%N)
  local secs
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
  if [ $rc -eq 0 ]; then
    detail=$(grep -E 'max\|Δ\||OK' "$log" | tail -1)
    record "$case" "$check" OK "${detail:-$(tail -1 "$log")}" "$secs"
  else
    detail=$(grep -E 'FAIL|error|rror:' "$log" | head -1)
    [ $rc -eq 124 ] && detail="timed out after ${limit}s"
    record "$case" "$check" FAIL "rc=$rc ${detail:-$(tail -1 "$log")}" "$secs"
  fi
  return $rc
}

# dim1 TENSOR FILE: dim 1 of TENSOR in a safetensors header; has TENSOR FILE.
st_header_py="$(cd "$(dirname "$0")" && pwd)/safetensors_header.py"
header() { python3 "$st_header_py" "$@"; }

{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -n)"
  "$launcher" devices
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv
  fi
} > "$out/devices.txt" 2>&1
cat "$out/devices.txt"
# The device the artifacts run on: the GPU (cuda), or with BT_DEVICE=cuda-emu
# the CUDA emulator (docs/cuda-emulator.md), which the launcher then picks.
device=cuda
[ "${BT_DEVICE:-}" = cuda-emu ] && device=cuda-emu
if ! grep -q "^$device: device" "$out/devices.txt"; then
  record all devices FAIL "$(grep "^$device:" "$out/devices.txt" | head -1)" 0
  echo "no usable CUDA GPU: nothing else to check" >&2
  exit 1
fi
record all devices OK "$(grep "^$device: device" "$out/devices.txt" | head -1)" 0

# state_check CASE NAME PROMPT TOKENS GENERATE_FLAGS...: the generation of
# PROMPT (--no-step-logits) with the resident state, then with each of
# BT_RESIDENT_STATE=0, BT_DEVICE_SAMPLING=0 and BT_CUDA_GRAPHS=0: every output
# byte-identical to the resident one (cmp).
state_check() {
  local case=$1 name=$2 prompt=$3 tokens=$4
  shift 4
  local base="$out/$case.$name"
  run "$case" "$name-resident" "${bt[@]}" generate --inputs "$prompt" \
    --max-new-tokens "$tokens" --no-step-logits "$@" -o "$base.resident.safetensors" || return 0
  local mode var
  for mode in host:BT_RESIDENT_STATE=0 host-sampler:BT_DEVICE_SAMPLING=0 \
              no-graphs:BT_CUDA_GRAPHS=0; do
    var=${mode#*:}
    mode=${mode%%:*}
    if run "$case" "$name-$mode" env "$var" "${bt[@]}" generate --inputs "$prompt" \
        --max-new-tokens "$tokens" --no-step-logits "$@" -o "$base.$mode.safetensors"; then
      run "$case" "$name-$mode-identical" cmp "$base.resident.safetensors" "$base.$mode.safetensors"
    fi
  done
}

repo="$(cd "$(dirname "$0")/.." && pwd)"
# The bf16 checks' interpreter (torch) and the share of positions that must
# match the reference to f32 precision (0 on a GPU: see the header).
bf16_py=${BT_PYTHON:-/usr/bin/python3}
[ -z "${BT_PYTHON:-}" ] && [ "$device" = cuda ] && bf16_py=python3
bf16_exact=()
[ "$device" = cuda ] && bf16_exact=(--min-exact 0)
[ -n "${BT_GPU_BF16_MIN_EXACT:-}" ] && bf16_exact=(--min-exact "$BT_GPU_BF16_MIN_EXACT")
n=0
for dir in "$fixtures"/*/; do
  dir=${dir%/}
  case=$(basename "$dir")
  artifact="$bundle/$case.btart"
  if [ ! -f "$artifact" ]; then
    record "$case" artifact SKIP "no $artifact in the bundle" 0
    continue
  fi
  n=$((n + 1))
  bt=("$launcher" --artifact "$artifact")
  run "$case" info "${bt[@]}" info > /dev/null

  # Forward numerics in fp32.
  evalout="$out/$case.eval.safetensors"
  if run "$case" eval "${bt[@]}" eval --inputs "$dir/inputs.safetensors" -o "$evalout"; then
    run "$case" eval-compare "$launcher" compare "$evalout" "$dir/outputs.safetensors" \
      --check logits:atol=1e-3 --check loss:atol=1e-3
  fi

  # Greedy generations.
  for gen in "$dir/generate.safetensors" "$dir/generate_eos.safetensors"; do
    [ -f "$gen" ] || continue
    file=$(basename "$gen" .safetensors)
    tokens=$(header dim1 official.new_tokens "$gen")
    modes=official
    header has trainpos.new_tokens "$gen" && modes="trainpos official"
    for mode in $modes; do
      flags=()
      [ "$mode" = official ] && flags=(--official-generate-positions)
      g="$out/$case.$file.$mode.safetensors"
      if run "$case" "$file-$mode" "${bt[@]}" generate --inputs "$gen" \
          --max-new-tokens "$tokens" --greedy "${flags[@]}" -o "$g"; then
        run "$case" "$file-$mode-compare" "$launcher" compare "$g" "$gen" \
          --check "new_tokens=$mode.new_tokens:equal" \
          --check "step_logits=$mode.step_logits:atol=1e-3"
        # decode_tokens replays a CUDA graph from its second block on,
        # decode_block (vanilla: decode_step) from its first call; the
        # direct calls (BT_CUDA_GRAPHS=0) must give the same bits.
        d="$out/$case.$file.$mode.direct.safetensors"
        if run "$case" "$file-$mode-direct" env BT_CUDA_GRAPHS=0 "${bt[@]}" generate \
            --inputs "$gen" --max-new-tokens "$tokens" --greedy "${flags[@]}" -o "$d"; then
          run "$case" "$file-$mode-graphs-vs-direct" "$launcher" compare "$g" "$d" \
            --check new_tokens:equal --check step_logits:atol=0
        fi
      fi
    done
  done

  # Training: grad and one AdamW step (artifacts with the training entries).
  if [ -f "$dir/adamw_step.safetensors" ] && grep -q "train_step" "$out/$case.info.txt"; then
    g="$out/$case.grad.safetensors"
    if run "$case" grad "${bt[@]}" grad --inputs "$dir/inputs.safetensors" -o "$g"; then
      run "$case" grad-compare "$launcher" compare "$g" "$dir/outputs.safetensors" \
        --absent-as-zero --check 'grad.*:rtol=1e-4' --check loss:rtol=1e-5
    fi
    norm=$(header scalar grad_norm_preclip "$dir/outputs.safetensors")
    clip=$(python3 -c "print(repr(min(1.0, 1.0 / ($norm + 1e-6))))")
    step="$out/$case.train-step"
    if run "$case" train-step "${bt[@]}" train-step --checkpoint "$dir" \
        --inputs "$dir/inputs.safetensors" --lr 1e-3 -o "$step" \
        --step-outputs "$step.outputs.safetensors"; then
      run "$case" train-step-compare "$launcher" compare "$step.outputs.safetensors" \
        "$dir/outputs.safetensors" --check loss:rtol=1e-5 \
        --check grad_norm=grad_norm_preclip:rtol=1e-5
      run "$case" adamw-compare "$launcher" compare "$step/model.safetensors" \
        "$dir/adamw_step.safetensors" --mask-file "$dir/outputs.safetensors" \
        --check "*:atol=1e-6,where=|grad.{}|*$clip>1e-6" \
        --check "*:atol=2.2e-3,where=|grad.{}|*$clip<=1e-6"
    fi
    # The optimizer alone, on the fixture's stored gradients: every element.
    apply="$out/$case.adamw-apply"
    if run "$case" adamw-apply "${bt[@]}" train-step --checkpoint "$dir" \
        --grads "$dir/outputs.safetensors" --lr 1e-3 -o "$apply" \
        --step-outputs "$apply.outputs.safetensors"; then
      run "$case" adamw-apply-compare "$launcher" compare "$apply/model.safetensors" \
        "$dir/adamw_step.safetensors" --check '*:atol=2e-7'
    fi
  fi

  # The resident decode loop against each of its switches (issue 13 items
  # 1-4; as test/bt-run/cuda-emu-resident-state.test on the emulator): the
  # same greedy generation with the state copied in and out every call
  # (BT_RESIDENT_STATE=0), with the host sampler (BT_DEVICE_SAMPLING=0) and
  # without CUDA graphs (BT_CUDA_GRAPHS=0) must be byte-identical to the
  # resident one; so must temperature / top-k / top-p sampling on the device
  # (bt_sample) and on the host from the same seeded streams; and, where the
  # case has an EOS prompt, eight rows of which three end at once (the KV
  # rows compacted within device memory) and a sampled EOS generation.
  if [ -f "$dir/generate.safetensors" ]; then
    state_check "$case" state "$dir/generate.safetensors" 24 --greedy --ignore-eos
    state_check "$case" sample "$dir/generate.safetensors" 16 --ignore-eos \
      --temperature 0.8 --top-k 50 --top-p 0.9 --seed 3
  fi
  if [ -f "$dir/generate_eos.safetensors" ]; then
    eos8="$out/$case.eos8.prompt.safetensors"
    if run "$case" eos8-prompt python3 "$repo/test/bt-run/Inputs/write_prompt.py" "$eos8" \
        --rows-of "$dir/generate_eos.safetensors" --rows 1,1,1,0,0,0,0,0; then
      state_check "$case" eos8 "$eos8" 24 --greedy
    fi
    state_check "$case" sample-eos "$dir/generate_eos.safetensors" 24 \
      --temperature 0.05 --top-k 3 --seed 11
  fi

  # bf16 (issue 13 item 2): the case's --dtype bf16 artifact against the
  # bf16 reference of bench/bt_torch.py.
  bf16art="$bundle/$case.bf16.btart"
  if [ -f "$bf16art" ]; then
    b16=("$launcher" --artifact "$bf16art")
    e16="$out/$case.bf16.eval.safetensors"
    if run "$case" bf16-eval "${b16[@]}" eval --inputs "$dir/inputs.safetensors" -o "$e16"; then
      run "$case" bf16-eval-compare "$bf16_py" "$repo/bench/bt_torch.py" \
        --check-bf16-gemms "$dir" "$e16" "${bf16_exact[@]}"
    fi
    gen="$dir/generate.safetensors"
    if [ -f "$gen" ]; then
      mode=official
      flags=(--official-generate-positions)
      if header has trainpos.new_tokens "$gen"; then mode=trainpos; flags=(); fi
      g16="$out/$case.bf16.generate.$mode.safetensors"
      if run "$case" "bf16-generate-$mode" "${b16[@]}" generate --inputs "$gen" \
          --max-new-tokens 12 --greedy "${flags[@]}" -o "$g16"; then
        run "$case" "bf16-generate-$mode-compare" "$bf16_py" "$repo/bench/bt_torch.py" \
          --check-bf16-generate "$dir" "$mode" "$g16" "${bf16_exact[@]}"
      fi
    fi
  else
    record "$case" bf16 SKIP "no $bf16art in the bundle" 0
  fi

  # compute-sanitizer memcheck on the eval and one generation.
  if [ -x "$sanitizer" ]; then
    run "$case" memcheck-eval "$sanitizer" --tool memcheck --error-exitcode 99 \
      --leak-check full "$launcher" --artifact "$artifact" eval \
      --inputs "$dir/inputs.safetensors" -o "$out/$case.memcheck.safetensors"
    if [ -f "$dir/generate.safetensors" ]; then
      run "$case" memcheck-generate "$sanitizer" --tool memcheck \
        --error-exitcode 99 "$launcher" --artifact "$artifact" generate \
        --inputs "$dir/generate.safetensors" --max-new-tokens 4 --greedy \
        -o "$out/$case.memcheck-gen.safetensors"
    fi
  else
    record "$case" memcheck SKIP "no $sanitizer" 0
  fi
done

# The training loop with its state resident on the device (issue 13 items 1
# and 5; as test/bt-run/cuda-emu-train-loop.test): the bundle's train/
# artifact (block_train_tiny, compiled by `bt-run train` with its tokenizer)
# trains 3 steps on Genesis 1-25 with the parameters and AdamW moments kept
# in device memory and again with BT_RESIDENT_STATE=0: the same log (loss,
# grad norm, lr) and byte-identical checkpoint and optimizer state; then
# BT_GPU_TRAIN_STEPS (default 50; 0: none) steps at batch 8 for the step time.
if [ -f "$bundle/train/model.btart" ]; then
  tr=("$launcher" --artifact "$bundle/train/model.btart" train --device "$device"
      --data "$repo/runtime/test/data/kjv/genesis_1-25.txt" --split heading --holdout 0.08
      --lr 3e-3 --warmup 2 --eval-every 0 --save-every 0 --progress none)
  if run train resident "${tr[@]}" --batch 2 --steps 3 -o "$out/train.resident" &&
     run train host env BT_RESIDENT_STATE=0 "${tr[@]}" --batch 2 --steps 3 -o "$out/train.host"; then
    run train log-identical diff <(cut -d, -f1-7 "$out/train.resident/log.csv") \
      <(cut -d, -f1-7 "$out/train.host/log.csv")
    run train model-identical cmp "$out/train.resident/step-000003/model.safetensors" \
      "$out/train.host/step-000003/model.safetensors"
    run train optimizer-identical cmp "$out/train.resident/step-000003/optimizer.safetensors" \
      "$out/train.host/step-000003/optimizer.safetensors"
  fi
  if [ "${BT_GPU_TRAIN_STEPS:-50}" != 0 ]; then
    run train steps "${tr[@]}" --steps "${BT_GPU_TRAIN_STEPS:-50}" --batch 8 -o "$out/train.long"
  fi
else
  record train loop SKIP "no $bundle/train/model.btart (scripts/gpu_prepare.sh)" 0
fi

# The GPU benchmark of the bundle's bench/ models.
size=${BT_GPU_BENCH_SIZE:-paper}
bench_models=()
for art in "$bundle"/bench/*.btart; do
  [ -f "$art" ] && bench_models+=("$art")
done
if [ ${#bench_models[@]} -eq 0 ]; then
  record all bench SKIP "no $bundle/bench/*.btart (gpu_prepare.sh with BT_GPU_BENCH=tiny|paper)" 0
elif [ "$size" != paper ] && [ "$size" != tiny ]; then
  record all bench FAIL "BT_GPU_BENCH_SIZE=$size: expected paper or tiny" 0
else
  if [ "$size" = paper ]; then
    bench_flags=(--setting prefill-heavy=2048/128,decode-heavy=128/2048
                 --batch "${BT_GPU_BENCH_BATCHES:-1,32,256,max}" --warmup 1
                 --iters "${BT_GPU_BENCH_ITERS:-2}")
    if [ "$device" = cuda ] && command -v nvidia-smi > /dev/null &&
       [[ ",${BT_GPU_BENCH_BATCHES:-max}," == *,max,* ]]; then
      gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
      [ -n "$gpu_mib" ] && bench_flags+=(--memory "${gpu_mib// /}MiB")
    fi
  else
    bench_flags=(--setting prefill-heavy=8/4,decode-heavy=4/8 --batch 1,2
                 --warmup 0 --iters 1)
  fi
  bench_flags+=(--device "$device" --baseline "${BT_GPU_BENCH_BASELINE:-torch}"
                --torch-script "$repo/bench/bt_torch.py" --progress none)
  # The interpreter with torch: $BT_PYTHON; on the GPU machine the `python3`
  # on PATH; else bench's default (/usr/bin/python3, Debian's torch).
  py=${BT_PYTHON:-}
  [ -z "$py" ] && [ "$device" = cuda ] && py=python3
  [ -n "$py" ] && bench_flags+=(--python "$py")
  csvs=()
  check_limit=$limit
  limit=${BT_GPU_BENCH_TIMEOUT:-1800}
  for art in "${bench_models[@]}"; do
    model=$(basename "$art" .btart)
    run "$model" bench "$launcher" --artifact "$art" bench "${bench_flags[@]}" \
      --csv "$out/bench.$model.csv" && csvs+=("$out/bench.$model.csv")
    # One optimizer step per call (the train setting; no PyTorch baseline),
    # for the artifacts compiled with the training entry points.
    # (grep reads all of info's output: under pipefail, grep -q's early exit
    # would fail the pipeline with the launcher's SIGPIPE.)
    if [ "$size" = paper ] && "$launcher" --artifact "$art" info 2> /dev/null | grep -c train_step > /dev/null; then
      run "$model" bench-train "$launcher" --artifact "$art" bench --setting train \
        --batch "${BT_GPU_BENCH_TRAIN_BATCHES:-8}" --warmup 1 --iters 2 --device "$device" \
        --baseline none --progress none --csv "$out/bench.$model.train.csv"
    fi
  done
  limit=$check_limit
  if [ ${#csvs[@]} -gt 0 ]; then
    run all bench-pareto-plot python3 "$repo/bench/pareto_plot.py" \
      "$out/bench_pareto" "${csvs[@]}"
  fi
fi

if [ "$n" -eq 0 ]; then
  echo "error: no fixture case of $fixtures has an artifact in $bundle" >&2
  exit 2
fi
echo "checked $n case(s), $failures failure(s); summary: $summary"
[ "$failures" -eq 0 ]
