#!/usr/bin/env bash
# Device-resident generation state on the CUDA emulator (issue 13 item 1,
# docs/codegen-cuda.md "Generation on the device"): generation of a
# fixture prompt through a `--target cuda` artifact, once with the KV caches,
# context and token ids kept in device memory (the default) and once with
# BT_RESIDENT_STATE=0 (every call copies its state in and out), and once
# resident with BT_DEVICE_SAMPLING=0 (the greedy steps sampled on the host
# instead of by the device's sampling kernel), and once resident with
# BT_CUDA_GRAPHS=0 (decode_tokens and decode_block, or the vanilla
# decode_step, called directly instead of replayed as CUDA graphs:
# decode_tokens once the block samples wholly on the device, the others from
# their first call):
# the outputs must be
# byte-identical, and the host<->device traffic of the decode loop
# (DeviceTraffic, printed by FormatCounters) is printed for FileCheck.
#   check-resident-state.sh FIXTURES_DIR WORK_DIR CASE PROMPT MAX_NEW_TOKENS [--sample] [generate flags]
# (PROMPT: a safetensors file of the case with prompt.input_ids, e.g.
# generate.safetensors, or an absolute path.) Greedy unless --sample: then the generate flags
# choose the sampling (--temperature, --top-k, --top-p, --seed), which the
# device's kernel bt_sample runs in the first two runs.
set -euo pipefail
fixtures=$1
work=$2
case=$3
prompt=$4
tokens=$5
shift 5
mode=(--greedy)
if [ "${1:-}" = --sample ]; then
  mode=()
  shift
fi
mkdir -p "$work"
case "$prompt" in
  /*) prompt_path=$prompt ;;
  *) prompt_path=$fixtures/$case/$prompt ;;
esac
art="$work/$case.cuda.btart"
bt-run compile "$fixtures/$case" --target cuda --dtype f32 --emit artifact -o "$art" 2> "$work/$case.compile.log"
for state in resident host host-sampler no-graphs; do
  env_state=1 env_sampling=1 env_graphs=1
  [ "$state" = host ] && env_state=0
  [ "$state" = host-sampler ] && env_sampling=0
  [ "$state" = no-graphs ] && env_graphs=0
  if ! BT_RESIDENT_STATE=$env_state BT_DEVICE_SAMPLING=$env_sampling BT_CUDA_GRAPHS=$env_graphs \
      bt-launcher --artifact "$art" generate --device cuda-emu \
      --inputs "$prompt_path" --max-new-tokens "$tokens" "${mode[@]}" "$@" \
      -o "$work/$case.$state.safetensors" 2> "$work/$case.$state.log"; then
    cat "$work/$case.$state.log" >&2
    exit 1
  fi
  if grep -q '^bt cuda-emu:' "$work/$case.$state.log"; then
    echo "FAIL: the emulator reported:" >&2
    cat "$work/$case.$state.log" >&2
    exit 1
  fi
  echo "== $case $state"
  grep -E '^(decode_tokens|decode_block|decode_step|decode loop|device traffic|per decode step|device memory|modelled H100)' \
    "$work/$case.$state.log"
done
cmp "$work/$case.resident.safetensors" "$work/$case.host.safetensors"
echo "$case: resident and host state give identical outputs"
cmp "$work/$case.resident.safetensors" "$work/$case.host-sampler.safetensors"
echo "$case: sampling on the device and on the host give identical outputs"
cmp "$work/$case.resident.safetensors" "$work/$case.no-graphs.safetensors"
echo "$case: decode_tokens and decode_block (vanilla: decode_step) replayed as CUDA graphs and called directly give identical outputs"
