#!/usr/bin/env bash
# One call of the device tool (docs/codegen-cuda.md, "Checks on a GPU
# machine"): runs scripts/gpu_check.sh on the bundle that
# scripts/gpu_prepare.sh built here, within a time budget, and packs every
# result into ONE archive under $OUT (the device tool brings back at most 8
# files, at most two folders down; gpu_check.sh writes one file per check).
#
#   scripts/gpu_device_call.sh [BUNDLE_DIR]      (run on the GPU machine)
#     BUNDLE_DIR      default build/gpu-bundle (carry it with the call)
#     BT_CALL_BUDGET  seconds the whole script may take (default 420): the
#                     gpu_check.sh run is killed after BT_CALL_BUDGET - 20 s so
#                     that the archive is always written
#   Everything else (BT_GPU_CHECK_TIMEOUT, BT_GPU_BENCH_SIZE, ...) is passed
#   to gpu_check.sh unchanged.
#   Output: $OUT/gpu-check.tgz (summary.csv, devices.txt, every log, table
#   and plot; the output tensors too with BT_CALL_KEEP_TENSORS=1),
#   $OUT/summary.csv, $OUT/bench.txt and bench.csv (the benchmark's reports
#   and rows), bench_pareto.png, $OUT/env.txt (driver, cuBLAS and tool paths
#   found), $OUT/console.txt (gpu_check.sh's stdout + stderr): at most 8
#   files, each small.
# cuBLAS is loaded with dlopen("libcublas.so.13"): the CUDA toolkit's lib64
# and the Python wheels' nvidia/cu13/lib folders are put on LD_LIBRARY_PATH.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${1:-build/gpu-bundle}
budget=${BT_CALL_BUDGET:-420}
out=${OUT:?OUT must name the output folder}
work=$(mktemp -d /tmp/gpu-check.XXXXXX)

libs=()
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && libs+=("$d")
done
while IFS= read -r f; do
  libs+=("$(dirname "$f")")
done < <(find /usr/local /opt -maxdepth 9 -name 'libcublas.so.1*' 2>/dev/null | sort -u)
LD_LIBRARY_PATH=$(IFS=:; echo "${libs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  nvidia-smi 2>&1 | head -20
  ls -l /usr/local/cuda/bin/compute-sanitizer 2>&1
  find /usr/local /opt -maxdepth 9 -name 'libcublas*.so*' 2>/dev/null | head
  python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.is_available())' 2>&1
} > "$out/env.txt" 2>&1

timeout -k 10 $((budget - 20)) env OUT="$work" scripts/gpu_check.sh "$bundle" \
  > "$out/console.txt" 2>&1
rc=$?
echo "gpu_check.sh exit status $rc" >> "$out/console.txt"
cp "$work/summary.csv" "$out/summary.csv" 2>/dev/null
# The benchmark's tables and plot as files of their own (bench.txt: every
# model's report, bench.csv: every row): they come back even when the
# archive does not.
if compgen -G "$work/*.bench*.txt" > /dev/null; then
  cat "$work"/*.bench*.txt > "$out/bench.txt"
fi
if compgen -G "$work/bench.*.csv" > /dev/null; then
  cat "$work"/bench.*.csv > "$out/bench.csv"
fi
[ -f "$work/bench_pareto.png" ] && cp "$work/bench_pareto.png" "$out/"
# The archive holds the logs, tables and plots; the output tensors and the
# training steps' checkpoints (megabytes each: with them the archive grew
# past what the device tool brings back, 2026-11-27) only when
# BT_CALL_KEEP_TENSORS=1.
if [ "${BT_CALL_KEEP_TENSORS:-0}" = 1 ]; then
  tar -C "$work" -czf "$out/gpu-check.tgz" . 2>> "$out/console.txt"
else
  (cd "$work" && find . -type f ! -name '*.safetensors' -print0 |
     tar --null -T - -czf "$out/gpu-check.tgz") 2>> "$out/console.txt"
fi
exit $rc
