"""``session.update``: validation of the GA (nested) and beta (flat) session shapes, and the
effective session reported in ``session.created`` / ``session.updated``.

Stock clients send OpenAI model and voice names (``gpt-realtime``, ``marin``...). Those are accepted
and mapped to the gateway's local models; the session reports what is really used.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Silence that ends a turn for semantic_vad's eagerness (we approximate it with server VAD).
EAGERNESS_SILENCE_MS = {"low": 1000, "medium": 600, "auto": 600, "high": 300}


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ServerVad(_Open):
    type: Literal["server_vad"]
    threshold: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    prefix_padding_ms: Optional[int] = Field(default=None, ge=0, le=5000)
    silence_duration_ms: Optional[int] = Field(default=None, ge=0, le=10000)
    create_response: Optional[bool] = None
    interrupt_response: Optional[bool] = None
    idle_timeout_ms: Optional[int] = Field(default=None, ge=5000, le=30000)


class SemanticVad(_Open):
    type: Literal["semantic_vad"]
    eagerness: Optional[Literal["low", "medium", "high", "auto"]] = None
    create_response: Optional[bool] = None
    interrupt_response: Optional[bool] = None


TurnDetectionModel = Union[ServerVad, SemanticVad]


class AudioFormat(_Open):
    type: Optional[str] = None
    rate: Optional[int] = None


class Transcription(_Open):
    model: Optional[str] = None
    language: Optional[str] = None
    prompt: Optional[str] = None


class AudioInput(_Open):
    format: Optional[AudioFormat] = None
    transcription: Optional[Transcription] = None
    turn_detection: Optional[TurnDetectionModel] = Field(default=None, discriminator="type")
    noise_reduction: Optional[dict] = None


class AudioOutput(_Open):
    format: Optional[AudioFormat] = None
    voice: Optional[str] = None
    speed: Optional[float] = Field(default=None, ge=0.25, le=1.5)


class Audio(_Open):
    input: Optional[AudioInput] = None
    output: Optional[AudioOutput] = None


class GaSession(_Open):
    """GA ``session`` object of ``session.update`` (fields the gateway honours; others accepted)."""

    type: Optional[Literal["realtime", "transcription"]] = None
    model: Optional[str] = None
    instructions: Optional[str] = None
    output_modalities: Optional[list[Literal["audio", "text"]]] = Field(default=None, min_length=1)
    audio: Optional[Audio] = None
    max_output_tokens: Optional[Union[int, Literal["inf"]]] = None
    tools: Optional[list[dict]] = None


class BetaSession(_Open):
    """Beta (flat) ``session`` object."""

    model: Optional[str] = None
    instructions: Optional[str] = None
    modalities: Optional[list[Literal["audio", "text"]]] = Field(default=None, min_length=1)
    voice: Optional[str] = None
    speed: Optional[float] = Field(default=None, ge=0.25, le=1.5)
    input_audio_format: Optional[str] = None
    output_audio_format: Optional[str] = None
    input_audio_transcription: Optional[Transcription] = None
    turn_detection: Optional[TurnDetectionModel] = Field(default=None, discriminator="type")
    max_response_output_tokens: Optional[Union[int, Literal["inf"]]] = None
    temperature: Optional[float] = None


BETA_KEYS = {"modalities", "voice", "input_audio_format", "output_audio_format", "input_audio_transcription",
             "turn_detection", "max_response_output_tokens", "temperature"}


class SessionConfigError(ValueError):
    """A structurally invalid ``session.update``; ``param`` is the dotted path of the bad field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


def is_beta_shape(session: dict) -> bool:
    return bool(BETA_KEYS & session.keys()) and "audio" not in session and "output_modalities" not in session


def _raise(exc: ValidationError) -> None:
    first = exc.errors()[0]
    path = ".".join(str(part) for part in first["loc"] if not str(part).startswith("function-"))
    # pydantic puts the discriminator value into the path ("...turn_detection.server_vad.threshold").
    path = path.replace(".server_vad", "").replace(".semantic_vad", "")
    raise SessionConfigError(f"Invalid value for 'session.{path}': {first['msg']}", f"session.{path}") from None


def parse_update(session: Any) -> tuple[dict, bool]:
    """Validate a ``session.update`` session object; return (normalised changes, is_beta).

    Normalised keys: instructions, modalities (list), voice, speed, max_tokens, turn_detection
    (dict, or None for manual turns; key absent = unchanged), model, transcription_model.
    Raises SessionConfigError on a structurally invalid value.
    """
    if not isinstance(session, dict):
        raise SessionConfigError("'session' must be an object", "session")
    beta = is_beta_shape(session)
    changes: dict[str, Any] = {}
    try:
        if beta:
            parsed = BetaSession.model_validate(session)
            if parsed.modalities is not None:
                changes["modalities"] = list(parsed.modalities)
            if parsed.voice is not None:
                changes["voice"] = parsed.voice
            if parsed.speed is not None:
                changes["speed"] = parsed.speed
            tokens = parsed.max_response_output_tokens
            if parsed.input_audio_transcription is not None:
                changes["transcription_model"] = parsed.input_audio_transcription.model
            if "turn_detection" in session:
                changes["turn_detection"] = _turn(parsed.turn_detection)
        else:
            parsed = GaSession.model_validate(session)
            if parsed.output_modalities is not None:
                changes["modalities"] = list(parsed.output_modalities)
            tokens = parsed.max_output_tokens
            audio = parsed.audio
            if audio and audio.output:
                if audio.output.voice is not None:
                    changes["voice"] = audio.output.voice
                if audio.output.speed is not None:
                    changes["speed"] = audio.output.speed
            if audio and audio.input:
                if audio.input.transcription is not None:
                    changes["transcription_model"] = audio.input.transcription.model
                    if audio.input.transcription.language:
                        changes["language"] = audio.input.transcription.language
                if "turn_detection" in (session.get("audio", {}).get("input") or {}):
                    changes["turn_detection"] = _turn(audio.input.turn_detection)
    except ValidationError as exc:
        _raise(exc)
    if parsed.instructions is not None:
        changes["instructions"] = parsed.instructions
    if parsed.model is not None:
        changes["model"] = parsed.model
    if tokens is not None:
        if tokens != "inf" and not (1 <= tokens <= 4096):
            key = "max_response_output_tokens" if beta else "max_output_tokens"
            raise SessionConfigError(f"Invalid value for 'session.{key}': must be 1..4096 or 'inf'", f"session.{key}")
        changes["max_tokens"] = tokens
    return changes, beta


def _turn(model: Optional[TurnDetectionModel]) -> Optional[dict]:
    if model is None:
        return None
    if isinstance(model, SemanticVad):
        return {
            "type": "semantic_vad",
            "eagerness": model.eagerness or "auto",
            "silence_duration_ms": EAGERNESS_SILENCE_MS[model.eagerness or "auto"],
            "create_response": model.create_response,
            "interrupt_response": model.interrupt_response,
        }
    return model.model_dump(exclude_none=True)
