#!/usr/bin/env bash
# Device call 2 of 2026-11-28: where `bt-launcher train` (resident Trainer)
# crashed in call 1 (SIGSEGV before its output directory existed): the
# backtrace under cuda-gdb and the same run with BT_RESIDENT_STATE=0.
set -u
tar -C build -xJf build/gpu-bundle.txz || exit 2
export LD_LIBRARY_PATH=/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
l=build/gpu-bundle/bt-launcher
tr=(--artifact build/gpu-bundle/train/model.btart train --device cuda
    --data runtime/test/data/kjv/genesis_1-25.txt --split heading --holdout 0.08
    --lr 3e-3 --warmup 2 --eval-every 0 --save-every 0 --progress lines --batch 2 --steps 3)
gdb=$(command -v cuda-gdb || echo /usr/local/cuda/bin/cuda-gdb)
{
  echo "== cuda-gdb ($gdb)"
  timeout 75 "$gdb" -batch -ex run -ex bt -ex "info registers rip" \
    --args "$l" "${tr[@]}" -o /tmp/t.gdb 2>&1 | grep -v '^\[New Thread\|^\[Thread' | tail -60
  echo "== BT_RESIDENT_STATE=0"
  timeout 30 env BT_RESIDENT_STATE=0 "$l" "${tr[@]}" -o /tmp/t.host 2>&1 | tail -8
  echo "rc ${PIPESTATUS[0]}"
} > "$OUT/train-debug.txt" 2>&1
exit 0
