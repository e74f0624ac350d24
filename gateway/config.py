"""The gateway's one typed configuration object.

Every field is settable three ways, highest priority first: a CLI flag (``--pool-size 4``), an
environment variable with the ``VG_`` prefix (``VG_POOL_SIZE=4``), or the default below. The flag
and variable names are derived from the field name, so this dataclass is the single list of settings.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

ENV_PREFIX = "VG_"


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "voice-gateway")


@dataclass
class GatewayConfig:
    """Settings of one gateway process. Units are in the field names (``_s``, ``_ms``)."""

    # --- server ---
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=8080, metadata={"help": "TCP port for HTTP signaling"})
    pool_size: int = field(default=2, metadata={"help": "number of PipelineUnits (concurrent calls)"})
    api_key: str = field(default="", metadata={"help": "if set, /v1/realtime/* needs 'Authorization: Bearer <key>'"})
    allowed_origins: str = field(default="", metadata={"help": "CORS origins, comma-separated, '*' for any"})
    retry_after_s: int = field(default=5, metadata={"help": "Retry-After seconds sent with 503 when the pool is full"})
    max_offer_bytes: int = field(default=64 * 1024, metadata={"help": "largest SDP offer accepted"})
    ice_servers: str = field(default="", metadata={"help": "STUN/TURN URLs, comma-separated (e.g. turn:host:3478)"})
    ice_username: str = field(default="", metadata={"help": "TURN username"})
    ice_credential: str = field(default="", metadata={"help": "TURN credential"})

    # --- models ---
    stt_model: str = field(default="whisper-base", metadata={"help": "'whisper-base' (bundled), a CTranslate2 dir or hub id"})
    llm_model: str = field(default="smollm2-135m", metadata={"help": "'smollm2-135m' (bundled GGUF), a local dir or hub id"})
    tts_voice: str = field(default="joe", metadata={"help": "'joe' (bundled en_US-joe-medium) or a path to a Piper .onnx voice"})
    model_cache_dir: str = field(default_factory=_default_cache_dir, metadata={"help": "where converted models are cached"})
    torch_threads: int = field(default=0, metadata={"help": "torch intra-op threads for the LLM (0 = number of CPUs)"})
    stt_threads: int = field(default=0, metadata={"help": "CTranslate2 threads for Whisper (0 = number of CPUs)"})

    # --- conversation ---
    instructions: str = field(
        default="You are a helpful voice assistant. Always reply in plain English, in one or two short sentences.",
        metadata={"help": "default system prompt"},
    )
    max_response_tokens: int = field(default=60, metadata={"help": "cap on LLM tokens per response"})
    history_turns: int = field(default=6, metadata={"help": "conversation turns kept in the LLM prompt"})

    # --- turn detection (server VAD) ---
    vad_threshold: float = field(default=0.5, metadata={"help": "speech probability threshold, 0..1"})
    silence_duration_ms: int = field(default=500, metadata={"help": "silence that ends a turn"})
    prefix_padding_ms: int = field(default=300, metadata={"help": "audio kept before detected speech"})
    min_speech_ms: int = field(default=96, metadata={"help": "speech needed before speech_started / barge-in (echo guard)"})
    max_utterance_s: float = field(default=30.0, metadata={"help": "a longer turn is cut and committed"})

    # --- media ---
    playout_buffer_ms: int = field(default=400, metadata={"help": "reply audio buffered ahead of the track (barge-in bound)"})

    # --- lifecycle ---
    drain_timeout_s: float = field(default=10.0, metadata={"help": "a drain longer than this quarantines the unit"})
    connect_timeout_s: float = field(default=30.0, metadata={"help": "ICE/DTLS must connect within this"})
    media_timeout_s: float = field(default=10.0, metadata={"help": "no RTP from the caller for this long ends the call"})
    idle_timeout_s: float = field(default=300.0, metadata={"help": "no speech and no response for this long ends the call"})
    max_call_s: float = field(default=3600.0, metadata={"help": "longest call"})

    log_level: str = field(default="INFO", metadata={"help": "logging level"})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "GatewayConfig":
        """Build from ``VG_*`` variables, then apply keyword overrides.

        Raises ValueError naming the variable when a value does not parse.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = ENV_PREFIX + f.name.upper()
            if key in environ:
                values[f.name] = _parse(f, environ[key], key)
        values.update(overrides)
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one ``--flag`` per field; defaults stay None so the environment can fill them."""
        for f in dataclasses.fields(cls):
            flag = "--" + f.name.replace("_", "-")
            help_text = f"{f.metadata.get('help', '')} [env {ENV_PREFIX}{f.name.upper()}]"
            parser.add_argument(flag, dest=f.name, default=None, type=_type_of(f), help=help_text)

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> "GatewayConfig":
        """Flags given on the command line win over ``VG_*`` variables."""
        given = {f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if getattr(args, f.name, None) is not None}
        return cls.from_env(environ, **given)

    @property
    def origins(self) -> list[str]:
        """``allowed_origins`` split on commas, blanks dropped; an entry ``"*"`` lets the CORS
        middleware accept any origin. Empty means no cross-origin access."""
        return [o.strip() for o in self.allowed_origins.split(",") if o.strip()]


def _type_of(f: dataclasses.Field) -> Any:
    kind = {"int": int, "float": float, "str": str, "bool": _parse_bool}.get(str(f.type), str)
    return kind


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {text!r}")


def _parse(f: dataclasses.Field, raw: str, key: str) -> Any:
    try:
        return _type_of(f)(raw)
    except ValueError as exc:
        raise ValueError(f"{key}={raw!r}: {exc}") from None
