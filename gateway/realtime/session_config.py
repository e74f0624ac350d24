"""``session.update``: validation of the GA (nested) and beta (flat) session shapes into the
normalised changes that :class:`~gateway.realtime.session_settings.SessionSettings` applies.

Stock clients send OpenAI model and voice names (``gpt-realtime``, ``marin``...). Those are accepted
here as any string and mapped to the gateway's local models by the session, which reports what is
really used in ``session.created`` / ``session.updated`` (``session_views``).

Validation is strict (a string where a number belongs is an error, not coerced) and happens before
anything is applied, so a rejected update leaves the session as it was. Unknown keys are accepted
and ignored: stock clients send fields this gateway has no use for (``tracing``, ``include``...).
``tools`` and ``tool_choice`` are checked by ``tools``, and sizes against the session's
``SessionLimits`` (``limits``): a too-long ``instructions`` is ``string_above_max_length``.

A session config is parsed once, where it comes in (an offer's or a client_secrets request's
``session``, the ``?model=`` of a WebSocket URL, a ``session.update``), into a frozen
:class:`SessionUpdate` checked against the limits in force; the offer, the grant of an ephemeral
key, ``open()`` and the session carry that object. Every problem is a
:class:`~gateway.realtime.items.ClientError` (the one protocol error type; the server turns it into
an HTTP 400 in one place, the session into an ``error`` event).
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.media import noise_suppression
from gateway.pipeline.turn import BARGE_IN_FIELDS
from gateway.realtime.items import ClientError
from gateway.realtime.limits import SessionLimits
from gateway.realtime.tools import check_choice, parse_tool_choice, parse_tools

# Silence that ends a turn for semantic_vad's eagerness (we approximate it with server VAD).
EAGERNESS_SILENCE_MS = {"low": 1000, "medium": 600, "auto": 600, "high": 300}
# Largest response the gateway allows a client to ask for (the configured cap still applies).
MAX_OUTPUT_TOKENS = 4096
# Beta audio format names -> the GA format objects the session keeps.
BETA_FORMATS: dict[str, dict[str, Any]] = {
    "pcm16": {"type": "audio/pcm", "rate": 24000},
    "g711_ulaw": {"type": "audio/pcmu"},
    "g711_alaw": {"type": "audio/pcma"},
}
PCM_24K = BETA_FORMATS["pcm16"]


class _Open(BaseModel):
    """Strict types; unknown keys accepted (and ignored); a number must be finite (NaN and
    Infinity are "a finite number" errors, not "should be <= 1")."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


class BargeInKnobs(_Open):
    """Gateway extensions of ``turn_detection`` (both types): how speech under the reply's audio is
    judged (``gateway.pipeline.bargein``) and the echo guard. Durations in ms."""

    min_interruption_words: Optional[int] = Field(default=None, ge=0, le=20)
    max_backchannel_ms: Optional[int] = Field(default=None, ge=100, le=5000)
    false_interruption_timeout_ms: Optional[int] = Field(default=None, ge=100, le=10000)
    echo_guard: Optional[bool] = None


class ServerVad(BargeInKnobs):
    """``turn_detection`` of type ``server_vad`` (durations in ms)."""

    type: Literal["server_vad"]
    threshold: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    prefix_padding_ms: Optional[int] = Field(default=None, ge=0, le=5000)
    silence_duration_ms: Optional[int] = Field(default=None, ge=0, le=10000)
    create_response: Optional[bool] = None
    interrupt_response: Optional[bool] = None
    idle_timeout_ms: Optional[int] = Field(default=None, ge=5000, le=30000)


class SemanticVad(BargeInKnobs):
    """``turn_detection`` of type ``semantic_vad``: served by server VAD, silence from ``eagerness``."""

    type: Literal["semantic_vad"]
    eagerness: Optional[Literal["low", "medium", "high", "auto"]] = None
    create_response: Optional[bool] = None
    interrupt_response: Optional[bool] = None


TurnDetectionModel = Union[ServerVad, SemanticVad]


class AudioFormat(_Open):
    """GA audio format. Over WebRTC the codec is negotiated in SDP, so this is only reported back."""

    type: Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
    rate: Optional[Literal[24000]] = None


# ``language`` is an ISO 639-1 code (Whisper's few without one have three letters: ``haw``, ``yue``);
# anything else made every turn's STT fail, and the value, echoed in every ``session.updated``, was
# unbounded (7 MB set once came back with each 60-byte ``session.update``).
LANGUAGE_PATTERN = r"^([a-z]{2,3})?$"  # "" (as null): unchanged
# A voice name (OpenAI's, a local voice's, an OpenAI-compatible TTS server's): handed to the TTS
# engine with every sentence, so bounded.
MAX_VOICE_CHARS = 64


class Transcription(_Open):
    """Input transcription settings; any model name is served by the local STT model."""

    model: Optional[str] = None
    language: Optional[str] = Field(default=None, pattern=LANGUAGE_PATTERN)
    prompt: Optional[str] = None


class NoiseReduction(_Open):
    """``audio.input.noise_reduction`` (beta ``input_audio_noise_reduction``): the caller's audio is
    noise-suppressed before VAD and STT (``gateway.media.noise_suppression``); null turns it off."""

    type: Literal["near_field", "far_field"]


class AudioInput(_Open):
    """GA ``audio.input``."""

    format: Optional[AudioFormat] = None
    transcription: Optional[Transcription] = None
    turn_detection: Optional[TurnDetectionModel] = Field(default=None, discriminator="type")
    noise_reduction: Optional[NoiseReduction] = None


ThinkingCueKind = Literal["off", "tone", "filler"]


class AudioOutput(_Open):
    """GA ``audio.output``; any voice name is served by the local voice. ``thinking_cue`` is a
    gateway extension (``gateway.pool.thinking``): what the media track plays while a tool call
    runs or an answer's first audio is late."""

    format: Optional[AudioFormat] = None
    voice: Optional[str] = Field(default=None, max_length=MAX_VOICE_CHARS)
    speed: Optional[float] = Field(default=None, ge=0.25, le=1.5)
    thinking_cue: Optional[ThinkingCueKind] = None


class Audio(_Open):
    """GA ``audio`` object of a session."""

    input: Optional[AudioInput] = None
    output: Optional[AudioOutput] = None


class GaSession(_Open):
    """GA ``session`` object of ``session.update`` (fields the gateway honours; others accepted)."""

    type: Optional[Literal["realtime", "transcription"]] = None  # transcription: no responses
    model: Optional[str] = None
    instructions: Optional[str] = None
    output_modalities: Optional[list[Literal["audio", "text"]]] = Field(default=None, min_length=1)
    audio: Optional[Audio] = None
    max_output_tokens: Optional[Union[int, Literal["inf"]]] = None
    tools: Optional[Any] = None  # checked by gateway.realtime.tools
    tool_choice: Optional[Any] = None
    recording: Optional[bool] = Field(default=None, strict=True)  # gateway extension (see parse_update)
    preemptive_reply: Optional[bool] = Field(default=None, strict=True)  # gateway extension (see parse_update)


class BetaSession(_Open):
    """Beta (flat) ``session`` object."""

    model: Optional[str] = None
    instructions: Optional[str] = None
    modalities: Optional[list[Literal["audio", "text"]]] = Field(default=None, min_length=1)
    voice: Optional[str] = Field(default=None, max_length=MAX_VOICE_CHARS)
    speed: Optional[float] = Field(default=None, ge=0.25, le=1.5)
    thinking_cue: Optional[ThinkingCueKind] = None  # gateway extension, as audio.output.thinking_cue
    input_audio_format: Optional[Literal["pcm16", "g711_ulaw", "g711_alaw"]] = None
    output_audio_format: Optional[Literal["pcm16", "g711_ulaw", "g711_alaw"]] = None
    input_audio_transcription: Optional[Transcription] = None
    input_audio_noise_reduction: Optional[NoiseReduction] = None
    turn_detection: Optional[TurnDetectionModel] = Field(default=None, discriminator="type")
    max_response_output_tokens: Optional[Union[int, Literal["inf"]]] = None
    temperature: Optional[float] = None
    tools: Optional[Any] = None  # checked by gateway.realtime.tools
    tool_choice: Optional[Any] = None
    recording: Optional[bool] = Field(default=None, strict=True)  # gateway extension (see parse_update)
    preemptive_reply: Optional[bool] = Field(default=None, strict=True)  # gateway extension (see parse_update)


# Keys only one of the two shapes has; a session object with neither keeps the session's dialect.
BETA_KEYS = {
    "modalities",
    "voice",
    "speed",
    "input_audio_format",
    "output_audio_format",
    "input_audio_transcription",
    "input_audio_noise_reduction",
    "turn_detection",
    "max_response_output_tokens",
    "temperature",
}
GA_KEYS = {"type", "audio", "output_modalities", "max_output_tokens"}


def detect_dialect(session: dict) -> Optional[str]:
    """ "ga", "beta", or None when the object has only keys both shapes share (``instructions``...)."""
    if GA_KEYS & session.keys():
        return "ga"
    if BETA_KEYS & session.keys():
        return "beta"
    return None


def _path(session: dict, loc: tuple) -> str:
    """Dotted path of a pydantic error location, keeping only the parts that index the input
    (pydantic adds union member tags such as ``int`` or ``server_vad`` to ``loc``)."""
    parts: list[str] = []
    node: Any = session
    for part in loc:
        if isinstance(node, dict) and part in node:
            node = node[part]
            parts.append(str(part))
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node) and parts:
            node = node[part]
            parts[-1] += f"[{part}]"
        elif isinstance(node, dict) and part in _FIELD_NAMES:
            parts.append(str(part))  # a required field that is missing from the input
            node = None
    return ".".join(["session", *parts])


_FIELD_NAMES = {
    name
    for model in (
        GaSession,
        BetaSession,
        Audio,
        AudioInput,
        AudioOutput,
        AudioFormat,
        ServerVad,
        SemanticVad,
        Transcription,
        NoiseReduction,
    )
    for name in model.model_fields
}


def _raise(session: dict, exc: ValidationError) -> None:
    first = exc.errors()[0]
    param = _path(session, first["loc"])
    raise ClientError(f"Invalid value for '{param}': {first['msg']}", "invalid_value", param) from None


def parse_update(session: Any, beta_default: bool = False, limits: Optional[SessionLimits] = None) -> tuple[dict, bool]:
    """Validate a ``session.update`` session object; return (normalised changes, is_beta).

    ``beta_default`` is the session's current dialect, kept when the object could be either.
    Normalised keys: instructions, modalities (list), voice, speed, max_tokens (int or "inf"),
    turn_detection (dict, or None for manual turns; key absent = unchanged), language, model,
    transcription_model, input_format, output_format (GA format dicts), tools (FunctionTool list),
    tool_choice (a ``tools.ToolChoice``), noise_reduction ("near_field", "far_field" or None = off;
    key absent = unchanged), thinking_cue ("off", "tone", "filler"; the gateway extension
    ``audio.output.thinking_cue``, beta ``thinking_cue``), recording (bool: the gateway extension
    ``"recording": true`` of either shape, record this call where the operator keeps recordings; key
    absent = unchanged), preemptive_reply (bool: the gateway extension ``"preemptive_reply"`` of
    either shape, start the reply at the caller's pause, ``gateway.pool.preemptive``; key absent =
    unchanged), session_type (GA ``type``: ``"realtime"`` or ``"transcription"``, a session that
    only transcribes the caller; key absent = unchanged). ``limits`` (default: ``SessionLimits()``)
    bound the sizes.
    Raises ClientError (``param`` the dotted path of the bad field; ``code`` ``invalid_value``,
    ``invalid_type``, or a limit's such as ``string_above_max_length``) on a structurally invalid
    value or one over a limit.
    """
    if not isinstance(session, dict):
        raise ClientError("Invalid type for 'session': expected an object", "invalid_value", "session")
    dialect = detect_dialect(session)
    beta = beta_default if dialect is None else dialect == "beta"
    try:
        changes = _beta_changes(session) if beta else _ga_changes(session)
    except ValidationError as exc:
        _raise(session, exc)
    tokens = changes.get("max_tokens")
    if tokens is not None and tokens != "inf" and not 1 <= tokens <= MAX_OUTPUT_TOKENS:
        key = "max_response_output_tokens" if beta else "max_output_tokens"
        raise ClientError(
            f"Invalid value for 'session.{key}': must be 1..{MAX_OUTPUT_TOKENS} or 'inf'",
            "invalid_value",
            f"session.{key}",
        )
    if changes.get("noise_reduction") and not noise_suppression.available():
        key = "input_audio_noise_reduction" if beta else "audio.input.noise_reduction"
        raise ClientError(
            f"Invalid value for 'session.{key}': noise reduction is not installed on this gateway (pywebrtc-audio)",
            "invalid_value",
            f"session.{key}",
        )
    _tool_changes(session, changes, limits or SessionLimits())
    return changes, beta


def _tool_changes(session: dict, changes: dict, limits: SessionLimits) -> None:
    """Check the size of ``instructions`` and parse ``tools`` / ``tool_choice`` into ``changes``."""
    if "instructions" in changes:
        limits.check_instructions(changes["instructions"], "session.instructions")
    if session.get("tools") is not None:
        changes["tools"] = parse_tools(session["tools"], "session.tools", limits)
    if session.get("tool_choice") is not None:
        changes["tool_choice"] = parse_tool_choice(session["tool_choice"], "session.tool_choice")
        if "tools" in changes:
            check_choice(changes["tool_choice"], changes["tools"], "session.tool_choice")


def _common(parsed: Union[GaSession, BetaSession], changes: dict) -> dict:
    if parsed.instructions is not None:
        changes["instructions"] = parsed.instructions
    if parsed.model is not None:
        changes["model"] = parsed.model
    if parsed.recording is not None:
        changes["recording"] = parsed.recording
    if parsed.preemptive_reply is not None:
        changes["preemptive_reply"] = parsed.preemptive_reply
    return changes


def _beta_changes(session: dict) -> dict:
    parsed = BetaSession.model_validate(session)
    changes: dict[str, Any] = {}
    if parsed.modalities is not None:
        changes["modalities"] = list(parsed.modalities)
    if parsed.voice is not None:
        changes["voice"] = parsed.voice
    if parsed.speed is not None:
        changes["speed"] = parsed.speed
    if parsed.thinking_cue is not None:
        changes["thinking_cue"] = parsed.thinking_cue
    if parsed.max_response_output_tokens is not None:
        changes["max_tokens"] = parsed.max_response_output_tokens
    if parsed.input_audio_transcription is not None:
        _transcription(parsed.input_audio_transcription, changes)
    if parsed.input_audio_format is not None:
        changes["input_format"] = dict(BETA_FORMATS[parsed.input_audio_format])
    if parsed.output_audio_format is not None:
        changes["output_format"] = dict(BETA_FORMATS[parsed.output_audio_format])
    if "turn_detection" in session:
        changes["turn_detection"] = _turn(parsed.turn_detection)
    if "input_audio_noise_reduction" in session:
        changes["noise_reduction"] = _noise_reduction(parsed.input_audio_noise_reduction)
    return _common(parsed, changes)


def _ga_changes(session: dict) -> dict:
    parsed = GaSession.model_validate(session)
    changes: dict[str, Any] = {}
    if parsed.type is not None:
        changes["session_type"] = parsed.type
    if parsed.output_modalities is not None:
        changes["modalities"] = list(parsed.output_modalities)
    if parsed.max_output_tokens is not None:
        changes["max_tokens"] = parsed.max_output_tokens
    audio = parsed.audio
    if audio and audio.output:
        if audio.output.voice is not None:
            changes["voice"] = audio.output.voice
        if audio.output.speed is not None:
            changes["speed"] = audio.output.speed
        if audio.output.thinking_cue is not None:
            changes["thinking_cue"] = audio.output.thinking_cue
        if audio.output.format is not None:
            changes["output_format"] = _format(audio.output.format)
    if audio and audio.input:
        if audio.input.transcription is not None:
            _transcription(audio.input.transcription, changes)
        if audio.input.format is not None:
            changes["input_format"] = _format(audio.input.format)
        if "turn_detection" in (session.get("audio", {}).get("input") or {}):
            changes["turn_detection"] = _turn(audio.input.turn_detection)
        if "noise_reduction" in (session.get("audio", {}).get("input") or {}):
            changes["noise_reduction"] = _noise_reduction(audio.input.noise_reduction)
    return _common(parsed, changes)


def _format(fmt: AudioFormat) -> dict:
    """A GA format object; PCM is always 24 kHz (the only rate OpenAI defines for it)."""
    return {"type": "audio/pcm", "rate": 24000} if fmt.type == "audio/pcm" else {"type": fmt.type}


def _transcription(transcription: Transcription, changes: dict) -> None:
    changes["transcription_model"] = transcription.model
    if transcription.language:
        changes["language"] = transcription.language


def _noise_reduction(model: Optional[NoiseReduction]) -> Optional[str]:
    """The noise reduction type ("near_field", "far_field"), or None for off."""
    return None if model is None else model.type


def _turn(model: Optional[TurnDetectionModel]) -> Optional[dict]:
    """The turn detection as given (unset fields absent); None = manual turns."""
    if model is None:
        return None
    if isinstance(model, SemanticVad):
        eagerness = model.eagerness or "auto"
        turn = {"type": "semantic_vad", "eagerness": eagerness, "silence_duration_ms": EAGERNESS_SILENCE_MS[eagerness]}
        for name in ("create_response", "interrupt_response", *BARGE_IN_FIELDS):
            if getattr(model, name) is not None:
                turn[name] = getattr(model, name)
        return turn
    known = set(ServerVad.model_fields)
    return {k: v for k, v in model.model_dump(exclude_none=True).items() if k in known}
