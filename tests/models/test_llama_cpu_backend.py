"""The llama.cpp that ``scripts/setup.sh`` installs runs on this CPU's widest instruction sets: its
wheel carries every x86 variant of the CPU backend and loads the best one for the CPU
(``scripts/build_llama_wheel.sh``), where the x86-64-v3 build it replaces used AVX2 on every CPU."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from tests.helpers import require_module

AVX512 = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")
# What /proc/cpuinfo must list for a variant built for a set (llama_print_system_info's name) to be
# chosen: ggml/src/ggml-cpu/arch/x86/cpu-feats.cpp scores a variant 0 unless the CPU has all of them.
SETS = {
    "AVX2": ("avx2", "fma", "f16c", "bmi2"),
    "AVX512": AVX512,
    "AVX512_VBMI": (*AVX512, "avx512vbmi"),
    "AVX512_VNNI": (*AVX512, "avx512_vnni"),
    "AVX512_BF16": (*AVX512, "avx512_vnni", "avx512_bf16"),
}


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def backend_sets(info: str) -> set[str]:
    """``CPU : SSE3 = 1 | AVX2 = 1 | ...`` -> the names set to 1."""
    named = (part.split("=") for part in info.split(":", 1)[-1].split("|") if "=" in part)
    return {name.strip() for name, value in named if value.strip() == "1"}


def test_the_backend_uses_every_instruction_set_this_cpu_has() -> None:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        pytest.skip("the CPU variants are x86-64 on Linux (/proc/cpuinfo)")
    llama_cpp = require_module("llama_cpp", "scripts/setup.sh")
    flags = cpu_flags()
    used = backend_sets(bytes(llama_cpp.llama_print_system_info()).decode())
    expected = {name for name, needs in SETS.items() if flags.issuperset(needs)}
    assert "AVX2" in expected or "avx2" not in flags
    assert expected <= used, f"the CPU has {sorted(expected - used)} but llama.cpp's backend was built without"
    assert used & set(SETS) <= expected, f"llama.cpp uses {sorted(used - expected)}, which this CPU lacks"
    assert "AMX_INT8" not in used, "the AMX variant is left out of the build: its kernels die of SIGILL"
    assert list(Path(llama_cpp.__file__).parent.joinpath("lib").glob("libggml-cpu-*.so")), "not the dispatch build"
