# -*- Python -*-
# lit configuration of the bt test suite (check-bt).

import os
import sys

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "BT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "unit", "fixtures"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.bt_obj_root, "test")
# scripts/sanitize.sh --lit: the tools from another folder (this build's
# bt-run and bt-opt next to the sanitizer build's bt-launcher), and the
# temporary files in another folder.
config.bt_tools_dir = lit_config.params.get("bt_tools_dir", config.bt_tools_dir)
config.test_exec_root = lit_config.params.get("bt_exec_root", config.test_exec_root)

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%bt_src_root", config.bt_src_root))
config.substitutions.append(("%bt_obj_root", config.bt_obj_root))
config.substitutions.append(("%fixtures", config.bt_fixtures_dir))

# `ptxas`: the CUDA toolkit's PTX assembler (no GPU needed) checks the PTX of
# the CUDA target (test/bt-run/cuda-ptxas.test).
ptxas = os.path.join(config.bt_cuda_path, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
# `libdevice`: the CUDA pipeline can compile kernels to PTX (gpu-module-to-binary
# links the toolkit's libdevice).
if os.path.exists(os.path.join(config.bt_cuda_path, "nvvm", "libdevice",
                               "libdevice.10.bc")):
    config.available_features.add("libdevice")
config.substitutions.append(("%cuda_path", config.bt_cuda_path))

# test/bt-run/manifest-generation.test decodes a manifest with protoc.
import shutil
if shutil.which("protoc"):
    config.available_features.add("protoc")

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.bt_tools_dir, config.llvm_tools_dir]
# Scripts and `not` find the bt tools and LLVM's test tools on PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.bt_tools_dir, append_path=True)
tools = [ToolSubst("bt-opt", unresolved="fatal"), ToolSubst("mlir-cpu-runner", unresolved="ignore")]
llvm_config.add_tool_substitutions(tools, tool_dirs)

# Execution tests of the CPU pipeline (test/Codegen/run-*.mlir): mlir-cpu-runner
# with the MLIR runner utils (printing), OpenBLAS (cblas_sgemm) and libomp.
llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
runner_utils = os.path.join(llvm_lib_dir, "libmlir_runner_utils.so")
c_runner_utils = os.path.join(llvm_lib_dir, "libmlir_c_runner_utils.so")
openblas = None
for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]:
    candidate = os.path.join(d, "libopenblas.so.0")
    if os.path.exists(candidate):
        openblas = candidate
        break
# LLVM's OpenMP runtime: the pipeline's parallel loops call it (__kmpc_*).
libomp = None
for d in ["/usr/lib/x86_64-linux-gnu", llvm_lib_dir]:
    candidate = os.path.join(d, "libomp.so.5")
    if os.path.exists(candidate):
        libomp = candidate
        break
if (os.path.exists(os.path.join(config.llvm_tools_dir, "mlir-cpu-runner"))
        and os.path.exists(runner_utils) and os.path.exists(c_runner_utils)
        and openblas and libomp):
    config.available_features.add("cpu-runner")
    config.substitutions.append(("%mlir_runner_utils", runner_utils))
    config.substitutions.append(("%mlir_c_runner_utils", c_runner_utils))
    config.substitutions.append(("%openblas", openblas))
    config.substitutions.append(("%libomp", libomp))

# `torch`: Debian's PyTorch (python3-torch) and numpy import, so the PyTorch
# baseline of `bt-run bench` (bench/bt_torch.py) can run.
import subprocess
torch_python = "/usr/bin/python3"
try:
    if subprocess.run([torch_python, "-c", "import torch, numpy"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                      timeout=300).returncode == 0:
        config.available_features.add("torch")
        config.substitutions.append(("%torch_python", torch_python))
except (OSError, subprocess.TimeoutExpired):
    pass

# The compile cache (include/bt/Codegen/CompileCache.h, docs/codegen.md
# "Compile cache"), shared by every test of a run: a model compiled with the
# same options by several tests (the fixture cases for eval, generation,
# grad, the emulator, the executables) goes through LLVM once. The keys hold
# the compiler's build-id, so entries of an older build are never read; the
# folder is emptied when bt-run changes, so that it does not grow with every
# rebuild. test/bt-run/compile-cache.test tests the cache itself in a folder
# of its own. scripts/sanitize.sh --lit (another exec root, the same bt-run)
# shares the folder.
import hashlib
bt_cache_dir = os.path.join(config.bt_obj_root, "test", "compile-cache")
bt_run = os.path.join(config.bt_tools_dir, "bt-run")
if os.path.exists(bt_run):
    digest = hashlib.sha256()
    with open(bt_run, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    stamp_path = os.path.join(bt_cache_dir, "bt-run.sha256")
    try:
        with open(stamp_path) as f:
            stale = f.read().strip() != digest.hexdigest()
    except OSError:
        stale = True
    if stale:
        shutil.rmtree(bt_cache_dir, ignore_errors=True)
        os.makedirs(bt_cache_dir, exist_ok=True)
        with open(stamp_path, "w") as f:
            f.write(digest.hexdigest() + "\n")
config.environment["BT_CACHE_DIR"] = bt_cache_dir
