"""CallSettings: everything a call's pipeline reads from its Realtime session, as one frozen value.

The session builds it (from the configured defaults at the claim, then from each ``session.update``:
``gateway.realtime.session_settings``) and hands it across the pool seam whole
(``PipelineControl.apply_settings``); the unit swaps it in with one assignment and each stage reads
the current value (``StageContext.settings``) or the value a response started with
(``ResponseRequest.settings``). Nothing in it is ever changed in place: a new value replaces it.

A new per-call setting is a field here (with its default, and a line in :meth:`CallSettings.defaults`
if the operator configures it), its parsing in ``gateway.realtime.session_config`` (the normalised
change is named as the field), and the stage that reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Optional

from gateway.config import GatewayConfig, config_default
from gateway.models.base import FunctionTool
from gateway.pipeline.turn import TurnDetection


@dataclass(frozen=True)
class CallSettings:
    """The settings of one call (OpenAI Realtime session fields, GA names in brackets).

    ``instructions`` (``instructions``): the system prompt. ``tools`` (``tools``) and
    ``tool_choice`` (``tool_choice`` as the engine takes it, ``GenerationOptions.tool_choice``:
    "auto", "none", "required" or a tool's name): what responses may call unless a
    ``response.create`` says otherwise; with ``instructions`` they make the prompt the LLM reads
    ahead. ``max_tokens`` (``max_output_tokens``): LLM tokens per response, at most the configured
    cap. ``language`` (``audio.input.transcription.language``): ISO 639-1 code STT transcribes in.
    ``turn`` (``audio.input.turn_detection``): what the VAD stage follows. ``noise_reduction``
    (``audio.input.noise_reduction`` type: "near_field", "far_field"; None: off): suppression of the
    caller's audio before VAD. ``voice`` (``audio.output.voice`` as the client named it; None: the
    TTS default) and ``speed`` (``audio.output.speed``, 1.0 = the voice's own rate): how TTS speaks.
    ``thinking_cue`` (gateway extension ``audio.output.thinking_cue``: "off", "tone", "filler"):
    what the media track plays while an answer is late (``gateway.pool.thinking``).
    ``preemptive_reply`` (gateway extension ``"preemptive_reply"`` of the session object; the
    operator's ``preemptive_reply`` until a session sets it): whether a reply is started at the
    caller's pause, before the turn ends (``gateway.pool.preemptive``).
    """

    instructions: str = config_default("instructions")
    tools: tuple[FunctionTool, ...] = ()
    tool_choice: str = "none"  # nothing to call without tools
    max_tokens: int = config_default("max_response_tokens")
    language: str = "en"
    turn: TurnDetection = field(default_factory=TurnDetection)
    noise_reduction: Optional[str] = None
    voice: Optional[str] = None
    speed: float = 1.0
    thinking_cue: str = config_default("thinking_cue")
    preemptive_reply: bool = config_default("preemptive_reply")

    @classmethod
    def defaults(cls, config: GatewayConfig) -> CallSettings:
        """A call's settings before any ``session.update``: the server's configured defaults."""
        turn = TurnDetection(
            threshold=config.vad_threshold,
            prefix_padding_ms=config.prefix_padding_ms,
            silence_duration_ms=config.silence_duration_ms,
            min_speech_ms=config.min_speech_ms,
            max_utterance_s=config.max_utterance_s,
            speaking_drafts=config.stt_drafts,
        )
        return cls(
            instructions=config.instructions,
            max_tokens=config.max_response_tokens,
            turn=turn,
            thinking_cue=config.thinking_cue,
            preemptive_reply=config.preemptive_reply,
        )


CALL_SETTING_NAMES = frozenset(f.name for f in fields(CallSettings))
