# -*- Python -*-
# Lit configuration of Loom's FileCheck tests.

import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Loom"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".onnxtext", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")
# Unit tests run through ctest; helper files are not tests.
config.excludes = ["Unit", "lib", "Inputs", "Conformance", "CMakeLists.txt", "lit.cfg.py",
                   "lit.site.cfg.py"]

llvm_config.with_system_environment(["HOME", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
# `not` and `split-file` at the start of a RUN line are found through PATH.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%loom_src", config.loom_src_root))

tool_dirs = [config.loom_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["loom-opt", "loom-translate", "loom-run", "loom-plan"], tool_dirs)
config.substitutions.append(("%loom_bin", config.loom_tools_dir))

# Multi-process runs: `%mpirun -np N ...` where Open MPI is installed (as
# root in CI containers, oversubscribed on small machines).
import shutil
mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", mpirun + " --oversubscribe --allow-run-as-root --mca btl self,vader"))

# The CUDA backend on the host emulator (lib/Runtime/CUDA/Emulator): plans
# run with `loom-run-emulated --device cuda` where the build has CUDA.
import os
if os.path.exists(os.path.join(config.loom_tools_dir, "loom-run-emulated")):
    config.available_features.add("cuda-emulator")

# A newer onnx than Debian's 1.12 (its version converter makes the opset
# 18-21 test models): the virtualenv scripts/bootstrap.sh makes.
if os.path.exists(config.onnx_python):
    config.available_features.add("onnx-newer")
    config.substitutions.append(("%onnx_python", config.onnx_python))
