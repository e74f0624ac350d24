#!/usr/bin/env bash
# Build the llama-cpp-python wheel the gateway uses (called by scripts/setup.sh when its wheel cache
# has none). Usage: scripts/build_llama_wheel.sh VERSION WHEEL_DIR   (PYTHON: the venv's python)
#
# Portable with runtime dispatch: every x86 variant of ggml's CPU backend is built as a library of
# its own (x64, sse42, sandybridge ... haswell = AVX2, skylakex/icelake/zen4 = AVX-512;
# -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON) and at load time ggml scores each against the
# CPU's cpuid (0 unless the CPU has every instruction set the variant was compiled for:
# ggml/src/ggml-cpu/arch/x86/cpu-feats.cpp) and loads the best. Never -march=native: that wheel
# crashes on other CPUs.
#
# The sdist gets three edits before it is built:
# - no sapphirerapids (AMX) variant: its AMX kernels die of SIGILL at the first matrix product
#   (built with Debian 12's GCC 12, the tile configuration's rows and columns are optimised away
#   before ldtilecfg, so tilezero runs on unconfigured tiles; llama.cpp PR 26954); AMX CPUs get the
#   zen4 variant (AVX-512 VBMI/VNNI/BF16), which they all have;
# - llama_cpp/llama_cpp.py loads the best variant from its own lib/ folder right after libllama:
#   llama-cpp-python 0.3.36 does not tell ggml where they are (llama_backend_init's
#   ggml_backend_load_all looks beside the executable and in the working directory only);
# - the version gets the local tag +cpuall, which names this build in the wheel cache (a wheel
#   built the old way, x86-64-v3 only, is 0.3.36 without a tag).
set -euo pipefail
version=${1:?usage: build_llama_wheel.sh VERSION WHEEL_DIR}
wheels=${2:?usage: build_llama_wheel.sh VERSION WHEEL_DIR}
python=${PYTHON:-.venv/bin/python}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --disable-pip-version-check -q --no-deps --no-binary :all: -d "$work" \
  "llama-cpp-python==$version"
tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
src="$work/llama_cpp_python-$version"

"$python" - "$src" "$version" <<'EOF'
import sys
from pathlib import Path

src, version = Path(sys.argv[1]), sys.argv[2]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if text.count(old) != 1:
        sys.exit(f"build_llama_wheel: {path} no longer has {old!r} once; check the edit against this version")
    path.write_text(text.replace(old, new))


amx = "            ggml_add_cpu_backend_variant(sapphirerapids SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI"
edit(src / "vendor/llama.cpp/ggml/src/CMakeLists.txt", amx, "            # (no AMX variant: voice-gateway)\n#" + amx)
edit(src / "llama_cpp/__init__.py", f'__version__ = "{version}"', f'__version__ = "{version}+cpuall"')
load = "_lib = load_shared_library(_lib_base_name, _base_path)\n"
edit(
    src / "llama_cpp/llama_cpp.py",
    load,
    load
    + "\n# voice-gateway's build (GGML_BACKEND_DL): the best CPU backend variant for this CPU, from lib/,\n"
    + "# registered in the libggml that libllama uses (looked up through it: lib/ holds copies, not links)\n"
    + "_lib.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]\n"
    + "_lib.ggml_backend_load_all_from_path.restype = None\n"
    + "_lib.ggml_backend_load_all_from_path(str(_base_path).encode())\n",
)
EOF

# The variants go beside libllama in llama_cpp/lib (CMAKE_INSTALL_BINDIR: where ggml installs its
# backend modules), the folder the edit above loads them from.
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DLLAMA_CURL=OFF \
-DCMAKE_INSTALL_BINDIR=llama_cpp/lib" \
  "$python" -m pip wheel --disable-pip-version-check -q --no-deps -w "$wheels" "$src"
