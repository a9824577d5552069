#!/usr/bin/env bash
# Device call 1 prepared for the next GPU session (repository root on the GPU
# machine, carrying build/gpu-bundle.txz of `BT_GPU_BENCH=paper
# scripts/gpu_prepare.sh`; timeout_s 590): every fixture check of
# gpu_check.sh (the training loop's rows confirm the launcher's embedded
# SentencePiece, e4a0e23), then the b4_85 benchmark vs PyTorch in f32 and
# in bf16 (block_main_b4_85_bf16: GEMMs on tensor cores; PyTorch in bf16),
# then the prefill-heavy batch-256 decode loop of both artifacts.
set -u
tar -C build -xJf build/gpu-bundle.txz || exit 2
rm -f build/gpu-bundle/bench/block_main_b4_300.btart
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
start=$(date +%s)
BT_GPU_CHECK_TIMEOUT=60 BT_GPU_BENCH_BATCHES=1,32,256 BT_GPU_BENCH_ITERS=1 \
  BT_GPU_BENCH_TIMEOUT=240 BT_GPU_BENCH_TRAIN_BATCHES=8 BT_GPU_TRAIN_STEPS=20 \
  BT_CALL_BUDGET=520 scripts/gpu_device_call.sh
echo "gpu_device_call: $(( $(date +%s) - start )) s" >> "$OUT/console.txt"
{
  l=build/gpu-bundle/bt-launcher
  p=build/gpu-bundle/prof/p256x2048.safetensors
  for a in block_main_b4_85 block_main_b4_85_bf16; do
    echo "== $a batch 256, 2048-token prompt, 64 new tokens"
    t0=$(date +%s.%N)
    timeout 30 "$l" --artifact "build/gpu-bundle/bench/$a.btart" generate --inputs "$p" \
      --max-new-tokens 64 --greedy --ignore-eos --no-step-logits -o /tmp/g.safetensors 2>&1 |
      grep -v '^wrote'
    echo "rc ${PIPESTATUS[0]}, wall $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.2f", b-a}') s"
  done
} > "$OUT/extra.txt" 2>&1
exit 0
