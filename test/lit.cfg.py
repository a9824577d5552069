# -*- Python -*-
# lit configuration of the bt test suite (check-bt).

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "BT"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "unit"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.bt_obj_root, "test")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%bt_src_root", config.bt_src_root))
config.substitutions.append(("%bt_obj_root", config.bt_obj_root))
config.substitutions.append(("%fixtures", os.path.join(os.path.dirname(config.bt_src_root), "shared", "fixtures", "official")))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.bt_tools_dir, config.llvm_tools_dir]
tools = [ToolSubst("bt-opt", unresolved="fatal")]
llvm_config.add_tool_substitutions(tools, tool_dirs)
