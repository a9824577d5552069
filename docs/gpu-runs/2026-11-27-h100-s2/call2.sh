#!/usr/bin/env bash
# Device call 2 of the second GPU session of 2026-11-27 (repository root on
# the GPU machine, carrying build/gpu-bundle.txz of this session's code): the
# fixture checks again (new kernels: LayerNorm, bias fusion, tile staging),
# the b4_85 benchmark vs PyTorch, and Nsight Compute profiles of b4_85 decode
# at batch 1 and at batch 256 after a 2048-token prompt (8 new tokens: two
# token-decoder calls and one block-decoder step over 513 blocks).
set -u
tar -C build -xJf build/gpu-bundle.txz || exit 2
rm -f build/gpu-bundle/bench/block_main_b4_300.btart
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
BT_GPU_CHECK_TIMEOUT=60 BT_GPU_BENCH_BATCHES=1,32,256 BT_GPU_BENCH_ITERS=1 \
  BT_GPU_BENCH_TIMEOUT=220 BT_CALL_BUDGET=330 scripts/gpu_device_call.sh
echo "gpu_device_call: $(( $(date +%s) - start )) s" >> "$OUT/console.txt"
{
  a=build/gpu-bundle/bench/block_main_b4_85.btart
  p=build/gpu-bundle/prof
  t0=$(date +%s)
  timeout 40 scripts/gpu_profile.sh $a $p/p1x128.safetensors 8 "$OUT/ncu_b1.csv"
  echo "ncu b1 rc $? $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
  timeout 50 scripts/gpu_profile.sh $a $p/p256x2048.safetensors 8 "$OUT/ncu_b256.csv"
  echo "ncu b256 rc $? $(( $(date +%s) - t0 )) s"
} > "$OUT/extra.txt" 2>&1
xz -9 "$OUT"/ncu_*.csv 2>/dev/null
exit 0
