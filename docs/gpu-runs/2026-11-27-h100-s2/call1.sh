#!/usr/bin/env bash
# Device call 1 of the second GPU session of 2026-11-27 (run from the
# repository root on the GPU machine, carrying build/gpu-bundle.txz):
# fixture checks incl. grad / train-step / AdamW (first time on a GPU), the
# b4_85 benchmark vs PyTorch, two Nsight Compute profiles of b4_85 decode and
# b4_300 prefill-heavy at batch 256 (the out-of-memory abort of the first run).
set -u
tar -C build -xJf build/gpu-bundle.txz || exit 2
mkdir -p build/gpu-bundle/bench-300
mv build/gpu-bundle/bench/block_main_b4_300.btart build/gpu-bundle/bench-300/
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
BT_GPU_CHECK_TIMEOUT=60 BT_GPU_BENCH_BATCHES=1,32,256 BT_GPU_BENCH_ITERS=1 \
  BT_GPU_BENCH_TIMEOUT=240 BT_CALL_BUDGET=370 scripts/gpu_device_call.sh
echo "gpu_device_call: $(( $(date +%s) - start )) s" >> "$OUT/console.txt"
{
  a=build/gpu-bundle/bench/block_main_b4_85.btart
  p=build/gpu-bundle/prof
  t0=$(date +%s)
  timeout 45 scripts/gpu_profile.sh $a $p/p1x128.safetensors 8 "$OUT/ncu_b1.csv"
  echo "ncu b1 rc $? $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
  timeout 60 scripts/gpu_profile.sh $a $p/p256x2048.safetensors 4 "$OUT/ncu_b256.csv"
  echo "ncu b256 rc $? $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
  timeout 60 build/gpu-bundle/bt-launcher --artifact build/gpu-bundle/bench-300/block_main_b4_300.btart \
    bench --device cuda --setting prefill-heavy=2048/128 --batch 256 --warmup 0 --iters 1 \
    --baseline none --progress none
  echo "b4_300 b256 rc $? $(( $(date +%s) - t0 )) s"
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv
} > "$OUT/extra.txt" 2>&1
xz -9 "$OUT"/ncu_*.csv 2>/dev/null
exit 0
