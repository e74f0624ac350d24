"""The gateway's one typed configuration object.

Every field is settable three ways, highest priority first: a CLI flag (``--pool-size 4``), an
environment variable with the ``VG_`` prefix (``VG_POOL_SIZE=4``), or the default below. The flag
and variable names are derived from the field name, so this dataclass is the single list of settings.

It is also the one home of their defaults: a dataclass elsewhere whose field has a setting's meaning
(``SessionLimits.max_instructions_chars``, ``TurnDetection.threshold``, ``ResponseRequest.max_tokens``...)
takes its default from here with :func:`config_default`, and what a call starts with is made from
a config by ``from_config`` / ``for_call``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.call_ids import INSTANCE_PATTERN
from gateway.config_limits import RecordingSettings, SourceLimitSettings
from gateway.config_sources import add_flags, values_from_env, values_from_flags

_INSTANCE_RE = re.compile(INSTANCE_PATTERN)


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "voice-gateway")


@dataclass
class GatewayConfig(SourceLimitSettings, RecordingSettings):
    """Settings of one gateway process. Units are in the field names (``_s``, ``_ms``). The
    per-source limits and the recording settings are groups of their own (``gateway.config_limits``)."""

    # --- server ---
    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on"})
    port: int = field(default=8080, metadata={"help": "TCP port for HTTP signaling"})
    pool_size: int = field(default=2, metadata={"help": "number of PipelineUnits (concurrent calls)"})
    api_key: str = field(default="", metadata={"help": "if set, /v1/realtime/* needs 'Authorization: Bearer <key>'"})
    allow_no_api_key: bool = field(
        default=False,
        metadata={"help": "serve on a host other than loopback without api_key (anyone reaching the port may call)"},
    )
    allowed_origins: str = field(
        default="",
        metadata={
            "help": "browser origins (https://app.example) that may call: CORS, WebSocket upgrades, POST/DELETE; "
            "comma-separated, '*' for any; empty: the gateway's own origin only"
        },
    )
    allowed_hosts: str = field(
        default="",
        metadata={
            "help": "Host header names the HTTP API answers besides loopback ones (DNS rebinding guard), "
            "comma-separated, '*' for any; empty: loopback names only when bound to loopback, else any"
        },
    )
    retry_after_s: int = field(
        default=5, metadata={"help": "Retry-After seconds sent with 503 (pool full, compute busy)"}
    )
    max_offer_bytes: int = field(default=64 * 1024, metadata={"help": "largest SDP offer accepted"})
    http_keepalive_timeout_s: float = field(
        default=60.0,
        metadata={
            "help": "an HTTP connection that holds no complete request for this long is closed: idle keep-alive, "
            "or request headers sent a byte at a time (slowloris)"
        },
    )
    ice_servers: str = field(
        default="",
        metadata={
            "help": "STUN/TURN servers: comma-separated URLs (turn:host:3478) or RTCIceServer JSON "
            '\'[{"urls": [...], "username": ..., "credential": ...}]\'; none: host candidates only'
        },
    )
    ice_username: str = field(default="", metadata={"help": "TURN username (for comma-separated ice_servers)"})
    ice_credential: str = field(default="", metadata={"help": "TURN credential (for comma-separated ice_servers)"})
    instance_id: str = field(
        default="",
        metadata={
            "help": "this process's name in its call ids (rtc_<instance>_<hex> for WebRTC, ws_... and sip_... "
            "for WebSocket and SIP calls; letters, digits, '-'), for routing behind a proxy; empty: derived "
            "from the host name and port"
        },
    )
    protect_observability: bool = field(
        default=False,
        metadata={"help": "with api_key set, /v1/pool, /v1/usage and /metrics need the API key too"},
    )

    # --- models (engines: gateway/models/backends.py; `voice-gateway models` lists them) ---
    stt_backend: str = field(default="whisper", metadata={"help": "STT engine ('voice-gateway models' lists them)"})
    stt_model: str = field(
        default="whisper-base",
        metadata={
            "help": "whisper: 'whisper-base' (bundled), a CTranslate2 dir or hub id; openai_http: the model name "
            "the server serves ('whisper-base': whisper-1)"
        },
    )
    llm_model: str = field(
        default="qwen2.5-coder-1.5b",
        metadata={
            "help": "llama_cpp: 'qwen2.5-coder-1.5b', 'qwen2.5-coder-0.5b', 'smollm2-135m' (bundled) or a .gguf; "
            "transformers: 'smollm2-135m', a local dir or hub id; openai_http: the model name the server serves"
        },
    )
    tts_voice: str = field(
        default="joe",
        metadata={
            "help": "piper: 'joe' (bundled en_US-joe-medium) or a path to a Piper .onnx voice; kokoro, "
            "kokoro_onnx, openai_http: the default voice (af_heart, jf_alpha, an OpenAI name; 'joe': the backend's)"
        },
    )
    tts_backend: str = field(default="piper", metadata={"help": "TTS engine ('voice-gateway models' lists them)"})
    tts_model: str = field(
        default="",
        metadata={
            "help": "kokoro: a Kokoro-82M folder (config.json, kokoro-v1_0.pth, voices/) or hub id; "
            "kokoro_onnx: '' (bundled int8) or a .onnx file; openai_http: the model name ('': tts-1); piper: unused"
        },
    )
    model_cache_dir: str = field(
        default_factory=_default_cache_dir,
        metadata={"help": "where converted models are cached"},
    )
    torch_threads: int = field(default=0, metadata={"help": "torch intra-op threads for the LLM (0 = number of CPUs)"})
    stt_threads: int = field(default=0, metadata={"help": "CTranslate2 threads for Whisper (0 = number of CPUs)"})
    tts_threads: int = field(
        default=0, metadata={"help": "ONNX Runtime threads for Piper (0 = Piper's own: every core)"}
    )
    stt_caller_voice: bool = field(
        default=True,
        metadata={
            "help": "Whisper hears only the caller's voiced stretch of each turn (level above the background "
            "floor), not background talkers before or after the caller's words"
        },
    )
    stt_min_word_probability: float = field(
        default=0.2,
        metadata={
            "help": "Whisper drops each word whose probability (mean over its tokens) is under this: most "
            "words it invents in background talk are unsure ones (0: keep every word)"
        },
    )
    # LLM engine: one shared instance per process, FIFO turns for all units.
    llm_backend: str = field(
        default="llama_cpp",
        metadata={"help": "LLM engine ('voice-gateway models' lists them): 'llama_cpp', 'openai_http', 'transformers'"},
    )
    llm_threads: int = field(
        default=1,
        metadata={"help": "llama.cpp decode threads (1 holds its speed when the other core is busy)"},
    )
    llm_batch_threads: int = field(
        default=1, metadata={"help": "llama.cpp prompt-processing threads (while STT/TTS run; see llm_idle_threads)"}
    )
    llm_idle_threads: int = field(
        default=2,
        metadata={
            "help": "llama.cpp threads for every step while one call is connected and no STT, TTS or "
            "end-of-turn call runs in this process (0 = off; 1 when other processes share the cores)"
        },
    )
    admit_by_compute: bool = field(
        default=True,
        metadata={
            "help": "refuse a new call at once (503 compute_busy) when the measured load admits no more "
            "conversations (busy cores, deadline misses, slow first clauses, the talking calls' expected cost "
            "of the cores and of the LLM's thread: docs/DEPLOYMENT.md); off: only pool_size limits calls"
        },
    )
    talking_capacity: int = field(
        default=0,
        metadata={
            "help": "live calls admitted at once by compute, beyond which a new one gets 503 compute_busy "
            "(replaces the measured load); 0: admission by the measured load (admit_by_compute)"
        },
    )
    llm_sequences: int = field(
        default=0,
        metadata={
            "help": "llama.cpp replies decoded together in one batch (continuous batching), more wait; a "
            "reply keeps its sequence while its audio plays (its later tokens are paced), so 0: one per "
            "pool unit (at least 4)"
        },
    )
    llm_busy_threads: int = field(
        default=1,
        metadata={"help": "llama.cpp threads for a step that advances several turns (the others run STT/TTS)"},
    )
    llm_context_tokens: int = field(
        default=4096,
        metadata={"help": "llama.cpp context (n_ctx); older turns are dropped to fit"},
    )
    llm_temperature: float = field(default=0.0, metadata={"help": "default sampling temperature (0 = greedy)"})
    llm_top_p: float = field(default=0.95, metadata={"help": "default nucleus sampling top_p (with temperature > 0)"})
    llm_turn_budget_s: float = field(
        default=30.0,
        metadata={"help": "most seconds of LLM compute per response (then 'incomplete')"},
    )
    llm_read_ahead: bool = field(
        default=True,
        metadata={
            "help": "llama.cpp reads a reply's prompt from the transcript at the caller's first pause, "
            "while the end of the turn is decided (kept only if the caller said nothing more)"
        },
    )
    stt_drafts: bool = field(
        default=True,
        metadata={
            "help": "while the caller speaks, transcribe the turn so far at dips in the speech (at most every "
            "0.5 s; at most 2 calls connected; lowest priority of the speech models) so the LLM reads the "
            "reply's prompt before the pause; each draft is one more STT call (turn off for a paid STT server)"
        },
    )
    preemptive_reply: bool = field(
        default=True,
        metadata={
            "help": "at the caller's first pause, start the reply (its first clause, spoken) from the "
            "speculative transcript, held unplayed; it plays the moment the turn ends with the same words, "
            "else it is discarded unheard (llama.cpp; lowest priority of the shared models)"
        },
    )
    llm_warm_session: str = field(
        default="",
        metadata={
            "help": "a JSON file holding the session object your app sends (instructions, tools: the "
            "'session' of session.update); its prompt is read into the LLM at start-up, so the first "
            "call of the process with it is as fast as the tenth"
        },
    )
    llm_state_cache_mb: int = field(
        default=128,
        metadata={"help": "llama.cpp KV states kept for sessions taking turns (0 = off)"},
    )
    llm_base_url: str = field(
        default="http://127.0.0.1:8000/v1",
        metadata={"help": "openai_http: Chat Completions base URL"},
    )
    llm_api_key: str = field(default="", metadata={"help": "openai_http: bearer key for the LLM server"})
    llm_connect_timeout_s: float = field(default=5.0, metadata={"help": "openai_http: connect timeout"})
    llm_read_timeout_s: float = field(default=30.0, metadata={"help": "openai_http: longest silence of the stream"})
    llm_concurrency: int = field(default=0, metadata={"help": "openai_http: requests in flight at once (0 = no limit)"})
    # Speech on an OpenAI-compatible server (stt_backend / tts_backend openai_http), as for the LLM.
    stt_base_url: str = field(default="http://127.0.0.1:8000/v1", metadata={"help": "openai_http: STT base URL"})
    stt_api_key: str = field(default="", metadata={"help": "openai_http: bearer key for the STT server"})
    stt_connect_timeout_s: float = field(default=5.0, metadata={"help": "openai_http: STT connect timeout"})
    stt_read_timeout_s: float = field(default=30.0, metadata={"help": "openai_http: longest wait for a transcript"})
    tts_base_url: str = field(default="http://127.0.0.1:8000/v1", metadata={"help": "openai_http: TTS base URL"})
    tts_api_key: str = field(default="", metadata={"help": "openai_http: bearer key for the TTS server"})
    tts_connect_timeout_s: float = field(default=5.0, metadata={"help": "openai_http: TTS connect timeout"})
    tts_read_timeout_s: float = field(default=30.0, metadata={"help": "openai_http: longest silence of the audio"})
    tts_response_format: str = field(
        default="wav", metadata={"help": "openai_http: 'wav' (any rate, from its header) or 'pcm' (24 kHz)"}
    )

    # --- conversation ---
    instructions: str = field(
        default=(
            "You are a helpful voice assistant on a phone call. Answer in short spoken English: one or two "
            "sentences, no markdown, lists, headings or emoji. Say numbers the way a person says them aloud."
        ),
        metadata={"help": "default system prompt"},
    )
    max_response_tokens: int = field(default=60, metadata={"help": "cap on LLM tokens per response"})
    history_turns: int = field(default=6, metadata={"help": "conversation turns kept in the LLM prompt"})

    # --- what one session may send to the shared LLM (gateway/realtime/limits.py); over one: an error event ---
    max_instructions_chars: int = field(
        default=16_000, metadata={"help": "longest 'instructions' of session.update or response.create, characters"}
    )
    max_tools: int = field(default=128, metadata={"help": "most tools per session or response"})
    max_tool_bytes: int = field(default=32_768, metadata={"help": "largest tool definition (JSON schema...), bytes"})
    max_tools_bytes: int = field(
        default=65_536, metadata={"help": "all tool definitions of a session or response together (JSON), bytes"}
    )
    max_item_chars: int = field(default=32_768, metadata={"help": "longest text of one conversation item, characters"})
    max_conversation_items: int = field(
        default=512, metadata={"help": "items a conversation holds (the oldest go first for server-made ones)"}
    )
    max_prompt_chars: int = field(
        default=64_000, metadata={"help": "conversation characters handed to the LLM (oldest turns dropped first)"}
    )

    # --- turn detection (server VAD) ---
    vad_threshold: float = field(default=0.5, metadata={"help": "speech probability threshold, 0..1"})
    silence_duration_ms: int = field(default=500, metadata={"help": "silence that ends a turn"})
    prefix_padding_ms: int = field(default=300, metadata={"help": "audio kept before detected speech"})
    min_speech_ms: int = field(
        default=96,
        metadata={"help": "speech needed before speech_started / barge-in (echo guard)"},
    )
    max_utterance_s: float = field(default=30.0, metadata={"help": "a longer turn is cut and committed"})
    turn_detector: str = field(
        default="smart_turn",
        metadata={
            "help": "'smart_turn' (Smart Turn v3.2 judges each pause; a client's server_vad still gets plain "
            "silence) or 'silence' (every turn ends after silence_duration_ms; the model is not loaded)"
        },
    )

    # --- media ---
    playout_buffer_ms: int = field(
        default=400,
        metadata={"help": "reply audio buffered ahead of the track (barge-in bound)"},
    )
    thinking_cue: str = field(
        default="off",
        metadata={
            "help": "what a caller hears while a tool call runs or an answer's first audio is late: 'off' "
            "(silence), 'tone' (a soft two-note sound, -30 dBFS) or 'filler' (the session's voice says 'One "
            "moment.' once); on the media track only (WebRTC, SIP), never in WebSocket audio or transcripts; "
            "per session: audio.output.thinking_cue"
        },
    )
    thinking_cue_after_ms: int = field(
        default=1500,
        metadata={"help": "the thinking cue starts this long after the end of the caller's turn (or response.create)"},
    )
    dtmf_barge_in: bool = field(
        default=False,
        metadata={"help": "a DTMF key press (RFC 4733) interrupts the reply, as speech does"},
    )
    dtmf_to_llm: bool = field(
        default=False,
        metadata={"help": "a DTMF key press becomes user text ('I pressed 5 on my keypad.') and is answered"},
    )

    # --- SIP (gateway.transports.sip) ---
    sip_port: int = field(default=0, metadata={"help": "SIP port (UDP and TCP); 0: no SIP"})
    sip_host: str = field(default="", metadata={"help": "address SIP and RTP listen on; empty: the HTTP host"})
    sip_public_address: str = field(
        default="",
        metadata={"help": "address put in Contact and SDP (behind NAT: the public one); empty: sip_host"},
    )
    sip_rtp_ports: str = field(
        default="", metadata={"help": "RTP port range 'first-last' (open it in the firewall); empty: ephemeral ports"}
    )
    sip_webhook_url: str = field(
        default="",
        metadata={"help": "where realtime.call.incoming is POSTed; empty: calls are accepted with the default session"},
    )
    sip_webhook_secret: str = field(
        default="", metadata={"help": "whsec_<base64> key signing the webhook (Standard Webhooks)"}
    )
    sip_accept_timeout_s: float = field(
        default=30.0, metadata={"help": "a call neither accepted nor rejected within this gets 480"}
    )
    sip_trusted: str = field(
        default="127.0.0.0/8,::1",
        metadata={
            "help": "without a webhook, calls are accepted only from these addresses/CIDR networks (comma-separated; "
            "others get 403); a UDP source can be forged: prefer TCP/TLS from the trunk"
        },
    )
    sip_rtp_latch: str = field(
        default="signalling",
        metadata={
            "help": "whose RTP sets where a call's media goes: 'signalling' (the INVITE's source IP), 'sdp' (or the "
            "SDP c= address: media relays), 'any' (the first packet: phones behind NAT via an SBC)"
        },
    )
    sip_srtp: str = field(
        default="auto",
        metadata={
            "help": "SDES-SRTP (RFC 4568 a=crypto) of the media: 'required' (plain RTP offers get 488), 'optional' "
            "(SRTP when offered), 'off' (plain RTP only); 'auto': required for calls over TLS or to a sips: URI, "
            "optional otherwise"
        },
    )
    sip_tls_cert: str = field(
        default="", metadata={"help": "PEM certificate (chain) for SIP over TLS; with sip_tls_key, TLS is on"}
    )
    sip_tls_key: str = field(default="", metadata={"help": "PEM private key of sip_tls_cert"})
    sip_tls_port: int = field(default=0, metadata={"help": "SIP over TLS port; 0: sip_port + 1 (5061 for 5060)"})

    # --- lifecycle ---
    drain_timeout_s: float = field(default=10.0, metadata={"help": "a drain longer than this quarantines the unit"})
    connect_timeout_s: float = field(default=30.0, metadata={"help": "ICE/DTLS must connect within this"})
    media_timeout_s: float = field(
        default=10.0,
        metadata={
            "help": "nothing from the caller (no RTP, RTCP or DTLS packet) for this long ends the call; keep it "
            "above the peer's RTCP interval (5 s for RFC 3550 defaults)"
        },
    )
    idle_timeout_s: float = field(
        default=300.0,
        metadata={"help": "no speech and no response for this long ends the call"},
    )
    max_call_s: float = field(default=3600.0, metadata={"help": "longest call"})

    shutdown_grace_s: float = field(
        default=30.0,
        metadata={"help": "on SIGTERM/SIGINT, how long active calls may finish the answer they hear"},
    )

    log_level: str = field(default="INFO", metadata={"help": "logging level"})
    log_format: str = field(default="text", metadata={"help": "'text' or 'json' (one JSON object a line)"})

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> GatewayConfig:
        """Build from ``VG_*`` variables, then apply keyword overrides.

        Raises ValueError naming the variable when a value does not parse.
        """
        values = values_from_env(cls, os.environ if environ is None else environ)
        values.update(overrides)
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """Add one ``--flag`` per field; defaults stay None so the environment can fill them."""
        add_flags(cls, parser)

    @classmethod
    def from_args(cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> GatewayConfig:
        """Flags given on the command line win over ``VG_*`` variables."""
        return cls.from_env(environ, **values_from_flags(cls, args))

    def __post_init__(self) -> None:
        """Raises ValueError for a ``log_level``, ``log_format``, ``thinking_cue``, ``instance_id``,
        ``talking_capacity``, ``pool_size`` (below 1), ``vad_threshold`` (outside 0..1) or port
        (``port``, ``sip_port``, ``sip_tls_port``: 0-65535) that cannot be used, ``record_all_calls``
        without a ``record_dir``, a per-source limit below 0 (``trusted_proxies`` and
        ``unlimited_sources`` are read by the door, at start), or SIP over TLS settings that cannot work
        (one of ``sip_tls_cert`` and ``sip_tls_key`` without the other, a file that is not there, no
        ``sip_port``, a TLS port out of range or equal to ``sip_port``)."""
        if self.record_all_calls and not self.record_dir:
            raise ValueError("record_all_calls needs record_dir: where the recordings go")
        if self.log_level.upper() not in logging.getLevelNamesMapping():
            raise ValueError(f"log_level {self.log_level!r}: use DEBUG, INFO, WARNING, ERROR or CRITICAL")
        if self.pool_size < 1:
            raise ValueError(f"pool_size {self.pool_size}: use 1 or more (each unit takes one call)")
        if not 0.0 <= self.vad_threshold <= 1.0:
            raise ValueError(f"vad_threshold {self.vad_threshold}: use a speech probability, 0..1")
        for name in ("port", "sip_port", "sip_tls_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise ValueError(f"{name} {getattr(self, name)}: use a TCP/UDP port, 0-65535")
        if self.log_format not in ("text", "json"):
            raise ValueError(f"log_format {self.log_format!r}: use 'text' or 'json'")
        if self.thinking_cue not in ("off", "tone", "filler"):
            raise ValueError(f"thinking_cue {self.thinking_cue!r}: use 'off', 'tone' or 'filler'")
        for name in (
            "max_sessions_per_source",
            "max_http_connections_per_source",
            "max_sidebands_per_call",
            "record_max_bytes",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} {getattr(self, name)}: use 0 (no limit) or a count")
        if self.talking_capacity < 0:
            raise ValueError(f"talking_capacity {self.talking_capacity}: use 0 (measured) or a count of callers")
        self._check_sip_tls()
        if self.instance_id and not _INSTANCE_RE.fullmatch(self.instance_id):
            raise ValueError(f"instance_id {self.instance_id!r}: use 1-40 letters, digits or '-'")

    def _check_sip_tls(self) -> None:
        if not (self.sip_tls_cert or self.sip_tls_key):
            return
        if not (self.sip_tls_cert and self.sip_tls_key):
            raise ValueError("SIP over TLS needs both sip_tls_cert and sip_tls_key")
        if not self.sip_port:
            raise ValueError("SIP over TLS needs sip_port (SIP is off without it)")
        for name in ("sip_tls_cert", "sip_tls_key"):
            if not Path(getattr(self, name)).expanduser().is_file():
                raise ValueError(f"{name} {getattr(self, name)!r}: no such file")
        tls_port = self.sip_tls_port or self.sip_port + 1
        if not 0 < tls_port < 65536 or tls_port == self.sip_port:
            raise ValueError(f"sip_tls_port {tls_port}: use a free port other than sip_port ({self.sip_port})")

    @property
    def instance(self) -> str:
        """The instance part of this process's call ids: ``instance_id``, else made from the host
        name and port (``myhost-8080``: lower case letters, digits and ``-``, at most 40 characters)."""
        if self.instance_id:
            return self.instance_id
        host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-") or "gateway"
        return f"{host[:33]}-{self.port}"

    @property
    def origins(self) -> list[str]:
        """``allowed_origins`` split on commas, blanks and a trailing ``/`` dropped, lower case (as
        a browser sends ``Origin``); an entry ``"*"`` accepts any origin. Empty means no
        cross-origin access (:mod:`gateway.server.request_guard`, the CORS middleware)."""
        return [o.strip().rstrip("/").lower() for o in self.allowed_origins.split(",") if o.strip()]

    @property
    def hosts(self) -> list[str]:
        """``allowed_hosts`` split on commas, blanks dropped (``gw.example``, ``10.0.0.5``, a port
        is ignored); ``"*"`` accepts any Host (:mod:`gateway.server.request_guard`)."""
        return [name.strip() for name in self.allowed_hosts.split(",") if name.strip()]


def config_default(name: str) -> Any:
    """The default of the setting ``name`` (a GatewayConfig field). Raises KeyError for no such setting."""
    found = _FIELDS[name]
    if found.default is not dataclasses.MISSING:
        return found.default
    return found.default_factory()  # type: ignore[operator]


_FIELDS = {f.name: f for f in dataclasses.fields(GatewayConfig)}
