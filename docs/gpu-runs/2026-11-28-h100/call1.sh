#!/usr/bin/env bash
# Device call 1 of the GPU session of 2026-11-28 (repository root on the GPU
# machine, carrying build/gpu-bundle.txz of this session's code): every
# fixture check of gpu_check.sh, with the resident decode loop against each
# of its switches (host state, host sampler, no CUDA graphs), device sampling,
# on-device KV compaction and the resident training loop, all on a GPU for the
# first time; the b4_85 benchmark vs PyTorch and its train setting; then the
# prefill-heavy batch-256 decode loop's wall time at 8 and 64 new tokens
# (the per-block-step cost outside the kernels seen on 2026-11-27).
set -u
tar -C build -xJf build/gpu-bundle.txz || exit 2
rm -f build/gpu-bundle/bench/block_main_b4_300.btart
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
BT_GPU_CHECK_TIMEOUT=60 BT_GPU_BENCH_BATCHES=1,32,256 BT_GPU_BENCH_ITERS=1 \
  BT_GPU_BENCH_TIMEOUT=200 BT_GPU_BENCH_TRAIN_BATCHES=8 BT_CALL_BUDGET=390 \
  scripts/gpu_device_call.sh
echo "gpu_device_call: $(( $(date +%s) - start )) s" >> "$OUT/console.txt"
{
  l=build/gpu-bundle/bt-launcher
  a=build/gpu-bundle/bench/block_main_b4_85.btart
  p=build/gpu-bundle/prof/p256x2048.safetensors
  for run in 8: 64: 64:BT_CUDA_GRAPHS=0; do
    n=${run%%:*}; e=${run#*:}
    echo "== b4_85 batch 256, 2048-token prompt, $n new tokens ${e:-(defaults)}"
    t0=$(date +%s.%N)
    timeout 45 env $e "$l" --artifact "$a" generate --inputs "$p" --max-new-tokens "$n" \
      --greedy --ignore-eos --no-step-logits -o /tmp/g.safetensors 2>&1 | grep -v '^wrote'
    echo "rc ${PIPESTATUS[0]}, wall $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s"
  done
} > "$OUT/extra.txt" 2>&1
exit 0
