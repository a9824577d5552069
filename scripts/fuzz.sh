#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang-19, ASan + UBSan, in the
# sanitizer build directory of scripts/sanitize.sh) and runs each one, from
# seed corpora taken from the fixtures and test data, with its dictionary. Any crash, leak or sanitizer report fails the
# script; the reproducer is left in $BT_FUZZ_DIR/<target>/ (crash-*, leak-*).
#
#   scripts/fuzz.sh [SECONDS-PER-TARGET] [TARGET...]     (default 30 s, all)
#   BT_FUZZ_RUNS=N scripts/fuzz.sh 0                     (N executions each)
#
# Environment: BT_FUZZ_BUILD (build directory, default build-asan, shared
# with scripts/sanitize.sh), BT_FUZZ_DIR (corpora and logs, default
# $BT_FUZZ_BUILD/work), BT_FUZZ_JOBS (ninja -j, default 2), BT_FUZZ_RUNS
# (executions per target; default -1: until SECONDS-PER-TARGET).
# Prints libFuzzer's final statistics (executions, cov, ft) per target.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-30}
shift || true
ALL_TARGETS=(safetensors artifact executable inputs config_yaml config_json tokenizer_json ir)
TARGETS=("${@:-${ALL_TARGETS[@]}}")
BUILD=${BT_FUZZ_BUILD:-build-asan}
IR_BUILD=${BT_FUZZ_IR_BUILD:-build-fuzz-ir}
WORK=${BT_FUZZ_DIR:-$BUILD/work}
RUNS=${BT_FUZZ_RUNS:--1}
FIXTURES=test/fixtures/official
JOBS=${BT_FUZZ_JOBS:-2}

if printf '%s\n' "${TARGETS[@]}" | grep -qv '^ir$'; then
  BT_SANITIZE_BUILD=$BUILD scripts/sanitize.sh --configure-only
  ninja -C "$BUILD" -j"$JOBS" bt-fuzzers
fi
# ir (bt-opt's parse + verify + bt passes) links MLIR: a build directory of
# its own with the compiler (only ir_fuzzer's part of it is built: the bt
# dialect, lib/Transforms and bt-opt's driver, instrumented; MLIR is the
# system's uninstrumented libMLIR).
if printf '%s\n' "${TARGETS[@]}" | grep -qx ir; then
  BT_SANITIZE_BUILD=$IR_BUILD BT_SANITIZE_COMPILER=1 scripts/sanitize.sh --configure-only
  ninja -C "$IR_BUILD" -j"$JOBS" ir_fuzzer
fi
ROOT=$PWD
bin_of() { cd "$([ "$1" = ir ] && echo "$IR_BUILD" || echo "$BUILD")/bin" && pwd; }
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)

# Seeds: small files of the right kind from the fixtures and test data, plus
# fuzz/corpus/<target>/ (hand-written seeds).
seeds() {
  local t=$1 dir=$WORK/$t/seeds
  rm -rf "$dir" && mkdir -p "$dir"
  case $t in
  safetensors) find "$FIXTURES" runtime/test/data test -name '*.safetensors' -size -256k ;;
  config_yaml) find "$FIXTURES" runtime/test/data test examples -name '*.yaml' -size -64k ;;
  config_json) find "$FIXTURES" runtime/test/data test -name 'config.json' -size -64k ;;
  tokenizer_json) find runtime/bpe/test/data test -name '*.json' -size -64k ! -path '*/expected/*' ! -name 'package*.json' ;;
  inputs) find "$FIXTURES" \( -name inputs.safetensors -o -name 'generate*.safetensors' \) -size -256k ;;
  artifact) "$(bin_of artifact)/artifact_seed" "$dir" ;;
  ir) # every -split-input-file chunk of the bt tests and examples
    find test/Dialect test/Transforms examples -name '*.mlir' -size -64k | while read -r f; do
      awk -v out="$dir/$(echo "$f" | tr / _)" '/^\/\/ -----/ {n++; next} {print > (out "." n)}' "$f"
    done ;;
  executable) # the executable less its 4096-byte prefix (executable_fuzzer.cc)
    "$(bin_of artifact)/artifact_seed" "$dir" && tail -c +4097 "$dir/seed-exe" >"$dir/seed-exe-body" &&
      rm "$dir/seed-exe" ;;
  esac | while read -r f; do cp "$f" "$dir/$(echo "$f" | tr / _)"; done
  if [ -d "fuzz/corpus/$t" ]; then cp fuzz/corpus/"$t"/* "$dir"/; fi
}
dict_of() {
  case $1 in
  safetensors) echo fuzz/dict/safetensors.dict ;;
  artifact | executable) echo fuzz/dict/artifact.dict ;;
  ir) echo fuzz/dict/mlir.dict ;;
  inputs) cat fuzz/dict/safetensors.dict fuzz/dict/inputs.dict >"$WORK/inputs/inputs.dict" &&
    echo "$WORK/inputs/inputs.dict" ;;
  config_yaml) echo fuzz/dict/yaml.dict ;;
  config_json) echo fuzz/dict/json.dict ;;
  tokenizer_json) echo fuzz/dict/tokenizer_json.dict ;;
  esac
}

status=0
for t in "${TARGETS[@]}"; do
  seeds "$t"
  mkdir -p "$WORK/$t/corpus"
  log=$WORK/$t/fuzz.log
  echo "== $t: $([ "$RUNS" -ge 0 ] && echo "$RUNS runs" || echo "${SECONDS_PER_TARGET}s")"
  # -rss_limit_mb/-malloc_limit_mb: a loader that allocates what a header
  # claims is a finding too. The first corpus dir is written, the seeds only
  # read.
  if ! (cd "$WORK/$t" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$(cd "$ROOT" && bin_of "$t")/${t}_fuzzer" corpus seeds -dict="$(cd "$ROOT" && realpath "$(dict_of "$t")")" \
          -max_total_time="$SECONDS_PER_TARGET" -runs="$RUNS" -max_len=65536 \
          -rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=10 -print_final_stats=1 \
          >"$log" 2>&1); then
    echo "FAIL: $t (log: $log)"; tail -40 "$log"; status=1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+[[:space:]]+DONE)' "$log" | sed "s/^/  /" || true
done
exit $status
