"""What ``session.created`` / ``session.updated`` show: the effective session in the GA (nested) or
beta (flat) shape of the OpenAI Realtime API, naming the local models and voice really used
whatever OpenAI names the client sent."""

from __future__ import annotations

from typing import Optional

from gateway.pipeline.turn import TurnDetection
from gateway.realtime.session_config import BETA_FORMATS
from gateway.realtime.session_settings import SessionSettings
from gateway.realtime.tools import tool_choice_view, tools_view

DEFAULT_VOICE = "joe"


def describe_session(
    settings: SessionSettings, *, session_id: str, beta: bool, local_models: dict[str, str], expires_at: Optional[int]
) -> dict:
    """The ``session`` object of ``session.created`` / ``session.updated``.

    ``local_models``: ``llm``, ``stt`` and (optional) ``voice`` names; ``expires_at``: Unix seconds
    when the call's longest duration runs out, None without a limit.
    """
    if beta:
        return _beta_view(settings, session_id, local_models, expires_at)
    return _ga_view(settings, session_id, local_models, expires_at)


def local_voice(local_models: dict[str, str]) -> str:
    """The voice that really speaks (whatever voice name the client asked for)."""
    return local_models.get("voice", DEFAULT_VOICE)


def _ga_view(settings: SessionSettings, session_id: str, local: dict[str, str], expires_at: Optional[int]) -> dict:
    if settings.transcription_only:
        return _transcription_view(settings, session_id, local, expires_at)
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": local["llm"],
        "output_modalities": list(settings.modalities),
        "instructions": settings.call.instructions,
        "tools": tools_view(settings.call.tools),
        "tool_choice": tool_choice_view(settings.tool_choice),
        "max_output_tokens": settings.call.max_tokens,
        "tracing": None,
        "prompt": None,
        "expires_at": expires_at,
        "audio": {
            "input": _input_view(settings, local),
            "output": {
                "format": dict(settings.output_format),
                "voice": local_voice(local),
                "speed": settings.call.speed,
            },
        },
        "include": None,
    }


def _transcription_view(
    settings: SessionSettings, session_id: str, local: dict[str, str], expires_at: Optional[int]
) -> dict:
    """A transcription session (OpenAI's ``RealtimeTranscriptionSession`` shape): input audio only."""
    return {
        "type": "transcription",
        "object": "realtime.session",
        "id": session_id,
        "expires_at": expires_at,
        "audio": {"input": _input_view(settings, local)},
        "include": None,
    }


def transcription_session_view(settings: SessionSettings, *, session_id: str, local_models: dict[str, str]) -> dict:
    """The ``session`` of ``transcription_session.updated`` (OpenAI's beta transcription session,
    ``object`` ``realtime.transcription_session``: flat, input audio only; its ``client_secret`` is
    shown only by the REST call that mints one, not over the socket)."""
    return {
        "id": session_id,
        "object": "realtime.transcription_session",
        "input_audio_format": beta_format(settings.input_format),
        "input_audio_transcription": {"model": local_models["stt"], "language": settings.call.language, "prompt": ""},
        "turn_detection": turn_view(settings.call.turn),
        "input_audio_noise_reduction": noise_reduction_view(settings.call.noise_reduction),
        "include": [],
    }


def _input_view(settings: SessionSettings, local: dict[str, str]) -> dict:
    return {
        "format": dict(settings.input_format),
        "transcription": {"model": local["stt"], "language": settings.call.language},
        "noise_reduction": noise_reduction_view(settings.call.noise_reduction),
        "turn_detection": turn_view(settings.call.turn),
    }


def _beta_view(settings: SessionSettings, session_id: str, local: dict[str, str], expires_at: Optional[int]) -> dict:
    return {
        "id": session_id,
        "object": "realtime.session",
        "model": local["llm"],
        "modalities": ["text", "audio"] if settings.audio else ["text"],
        "instructions": settings.call.instructions,
        "voice": local_voice(local),
        "input_audio_format": beta_format(settings.input_format),
        "output_audio_format": beta_format(settings.output_format),
        "input_audio_transcription": {"model": local["stt"], "language": settings.call.language},
        "input_audio_noise_reduction": noise_reduction_view(settings.call.noise_reduction),
        "turn_detection": turn_view(settings.call.turn),
        "tools": tools_view(settings.call.tools),
        "tool_choice": tool_choice_view(settings.tool_choice),
        "max_response_output_tokens": settings.call.max_tokens,
        "speed": settings.call.speed,
        "tracing": None,
        "expires_at": expires_at,
    }


def noise_reduction_view(kind: Optional[str]) -> Optional[dict]:
    """``noise_reduction`` as the client sees it: ``{"type": ...}``, or None when off."""
    return None if kind is None else {"type": kind}


def turn_view(turn: TurnDetection) -> Optional[dict]:
    """``turn_detection`` as the client sees it: None for manual turns; semantic_vad shows its
    eagerness (its silence is the gateway's approximation)."""
    if turn.mode == "manual":
        return None
    if turn.kind == "semantic_vad":
        return {
            "type": "semantic_vad",
            "eagerness": turn.eagerness,
            "create_response": turn.create_response,
            "interrupt_response": turn.interrupt_response,
        }
    return {
        "type": "server_vad",
        "threshold": turn.threshold,
        "prefix_padding_ms": turn.prefix_padding_ms,
        "silence_duration_ms": turn.silence_duration_ms,
        "idle_timeout_ms": turn.idle_timeout_ms,
        "create_response": turn.create_response,
        "interrupt_response": turn.interrupt_response,
    }


def beta_format(fmt: dict) -> str:
    """The beta name of a GA audio format object (``pcm16`` when unknown)."""
    for name, ga in BETA_FORMATS.items():
        if ga["type"] == fmt.get("type"):
            return name
    return "pcm16"
