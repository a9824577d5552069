#!/usr/bin/env bash
# Installs the Debian 12 packages bt needs (as root). Skips apt-get when every
# package is already installed, so repeated runs are fast.
#   scripts/install-deps.sh [extra packages...]
set -euo pipefail

PACKAGES=(
  # Compiler toolchain: LLVM/MLIR 19 (libMLIR.so, mlir-tblgen, FileCheck, lit);
  # lld links the tools (ld.lld) and lld-19 the generated kernel libraries.
  llvm-19-dev libmlir-19-dev mlir-19-tools llvm-19-tools clang-19 lld lld-19
  cmake ninja-build python3 g++
  # Runtime and tools: protobuf, abseil, GoogleTest, OpenBLAS, yaml-cpp,
  # SentencePiece, JSON (safetensors headers, config.json).
  libprotobuf-dev protobuf-compiler libabsl-dev libgtest-dev libopenblas-dev
  libyaml-cpp-dev libsentencepiece-dev sentencepiece nlohmann-json3-dev
  # The byte-level BPE tokenizer (runtime/bpe, tokenizer.json): PCRE2 for the
  # pre-tokenizer regex, utf8proc for NFC (static archives in both).
  libpcre2-dev libutf8proc-dev
  # The CUDA emulator's fibers (runtime/device/cuda_emu/launch.cc): context
  # switches without glibc swapcontext's signal-mask system call.
  libboost-context-dev
  # One CPU thread pool (docs/codegen.md, "Threads"): LLVM's OpenMP runtime for
  # the generated kernels' parallel loops, and OpenBLAS's OpenMP build.
  libomp-19-dev libopenblas0-openmp
  # Static archives for the self-contained bt-launcher (BT_STATIC_LAUNCHER):
  # OpenBLAS needs libgfortran.a; zlib for protobuf.
  libgfortran-12-dev zlib1g-dev
  # Training (bt-run train, scripts/main.sh): loss plots, and the King James
  # Bible (`bible gen1:1-rev22:21`) as training text.
  gnuplot-nox bible-kjv
  # Fuzzing and sanitizers (fuzz/, scripts/fuzz.sh): libFuzzer and the
  # ASan/UBSan runtimes of clang-19.
  libclang-rt-19-dev
)
PACKAGES+=("$@")

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "== installing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "error: missing packages and not root; run as root or: apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
