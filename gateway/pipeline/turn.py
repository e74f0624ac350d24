"""Turn detection settings of one call (Realtime ``audio.input.turn_detection``) and the pause
rules the VAD stage follows to end a turn."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from gateway.config import config_default

# Pause after which the semantic end-of-turn model (Smart Turn) is asked, ms: after the ~150 ms
# gaps inside a phrase, before a person notices a pause. Silence is counted in 32 ms VAD chunks, so
# the model is asked at the first chunk boundary at or past it (192 ms).
SEMANTIC_CHECK_MS = 190
# Pause after which STT starts on the turn so far, ms (speculatively: dropped if the caller goes on).
SPECULATE_AFTER_MS = 120
# A probability under this is "mid-thought": the caller is expected to go on, so the wait grows.
MID_THOUGHT_BELOW = 0.1

# semantic_vad eagerness -> (probability that ends the turn at the first check, silence that ends it
# when the model says "not finished", longest silence when it says "mid-thought"), ms. The silences
# are those the Realtime layer reports for eagerness (EAGERNESS_SILENCE_MS); OpenAI documents the
# longest waits of low/medium/high as 8/4/2 s, bounded here for a CPU gateway.
EAGERNESS = {
    "high": (0.3, 300, 600),
    "medium": (0.5, 600, 1500),
    "auto": (0.5, 600, 1500),
    "low": (0.7, 1000, 3000),
}
# The gateway's default turn detection (kind "server_vad", detector "smart_turn"): a complete turn
# ends at the first check; otherwise ``silence_duration_ms`` as configured, and a mid-thought pause
# at most this much longer.
DEFAULT_COMPLETE_ABOVE = 0.5
DEFAULT_MID_THOUGHT_EXTRA_MS = 300


# Gateway extensions of ``turn_detection`` (see TurnDetection), set like OpenAI's own fields.
BARGE_IN_FIELDS = (
    "min_interruption_words",
    "max_backchannel_ms",
    "false_interruption_timeout_ms",
    "echo_guard",
)


@dataclass(frozen=True)
class TurnDetection:
    """``mode``: "server_vad" (the VAD ends turns) or "manual" (only ``input_audio_buffer.commit`` does).

    ``kind`` is what the client asked for ("server_vad" or "semantic_vad"); ``detector`` how the
    gateway ends a turn: "smart_turn" (a semantic model judges each pause; the default, and what
    ``semantic_vad`` gets, its ``eagerness`` choosing the thresholds) or "silence" (a fixed
    ``silence_duration_ms``; what a client gets that sends ``server_vad``). Without a loaded
    semantic model (``turn_detector = silence``) every turn ends by silence. ``threshold`` 0..1
    speech probability; durations in ms. ``min_speech_ms`` is the echo guard: speech shorter than
    this neither starts a turn nor interrupts a reply. ``speculative_stt``: start STT at the first
    short pause (its result is used only if the caller says nothing more); ``speaking_drafts``: also
    while the caller speaks (``gateway.pipeline.drafts``; the operator's ``stt_drafts``).

    Barge-in (``gateway.pipeline.bargein``; gateway extensions of ``turn_detection``): speech under
    the reply's audio pauses it and is decided by its words. ``min_interruption_words``: words,
    backchannels left out, that cancel the reply (0: any speech cancels it at once, no pause);
    ``max_backchannel_ms``: speech this long cancels it whatever its words;
    ``false_interruption_timeout_ms``: with no words known this long after the speech began, the
    reply plays on. ``echo_guard``: speech that is mostly a delayed copy of the reply's own audio
    (``echo_guard_correlation`` or more, see ``gateway.media.echo_reference``) starts no turn.
    """

    mode: str = "server_vad"
    kind: str = "server_vad"
    detector: str = "smart_turn"
    eagerness: str = "auto"
    threshold: float = config_default("vad_threshold")
    prefix_padding_ms: int = config_default("prefix_padding_ms")
    silence_duration_ms: int = config_default("silence_duration_ms")
    min_speech_ms: int = config_default("min_speech_ms")
    create_response: bool = True
    interrupt_response: bool = True
    idle_timeout_ms: Optional[int] = None
    max_utterance_s: float = config_default("max_utterance_s")
    speculative_stt: bool = True
    speaking_drafts: bool = config_default("stt_drafts")
    min_interruption_words: int = 1
    max_backchannel_ms: int = 1500
    false_interruption_timeout_ms: int = 1000
    echo_guard: bool = True
    echo_guard_correlation: float = 0.6

    @property
    def drafts_while_speaking(self) -> bool:
        """Whether the turn is drafted while the caller speaks (``gateway.pipeline.drafts``):
        ``speculative_stt`` and ``speaking_drafts`` on, and ``create_response``: a draft is for the
        reply's prompt read ahead, which a session whose turns start no response (a transcription
        session, a client that sends ``response.create`` itself) never reads."""
        return self.speculative_stt and self.speaking_drafts and self.create_response

    def updated(self, settings: Optional[dict]) -> TurnDetection:
        """A copy with a validated ``turn_detection`` object applied (its None fields left as they
        are); None switches to manual turns. A client's ``server_vad`` gets plain silence,
        ``semantic_vad`` the semantic model."""
        if settings is None:
            return dataclasses.replace(self, mode="manual")
        kind = settings.get("type", "server_vad")
        changes: dict[str, Any] = {
            "mode": "server_vad",
            "kind": kind,
            "detector": "smart_turn" if kind == "semantic_vad" else "silence",
        }
        if kind == "semantic_vad":
            changes["eagerness"] = settings.get("eagerness", "auto")
        for name in (
            "threshold",
            "prefix_padding_ms",
            "silence_duration_ms",
            "create_response",
            "interrupt_response",
            "idle_timeout_ms",
            *BARGE_IN_FIELDS,
        ):
            value = settings.get(name)
            if value is not None:
                changes[name] = value
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class PauseRules:
    """When a pause in the caller's speech ends the turn (all in ms of continuous silence).

    ``check_ms``: ask the semantic model once the pause is this long (None: no model, silence only).
    The turn ends at once when it says complete (probability > ``complete_above``), after
    ``silence_ms`` when it does not, and after ``mid_thought_ms`` when it says the caller is
    mid-thought (probability < ``mid_thought_below``). ``speculate_ms``: start STT speculatively
    at this pause (None: never).
    """

    silence_ms: int
    check_ms: Optional[int] = None
    complete_above: float = DEFAULT_COMPLETE_ABOVE
    mid_thought_below: float = MID_THOUGHT_BELOW
    mid_thought_ms: int = 0
    speculate_ms: Optional[int] = None

    def wait_ms(self, probability: Optional[float]) -> int:
        """The pause that ends the turn, given the model's answer (None: not asked yet, or no model)."""
        if probability is None:
            return self.silence_ms
        if probability > self.complete_above:
            return self.check_ms or 0
        if probability < self.mid_thought_below:
            return max(self.silence_ms, self.mid_thought_ms)
        return self.silence_ms


def pause_rules(turn: TurnDetection, semantic_model: bool) -> PauseRules:
    """The rules for ``turn``; ``semantic_model``: whether an end-of-turn model is loaded."""
    speculate = SPECULATE_AFTER_MS if turn.speculative_stt else None
    if not semantic_model or turn.detector != "smart_turn":
        return PauseRules(silence_ms=turn.silence_duration_ms, speculate_ms=speculate)
    if turn.kind == "semantic_vad":
        complete_above, silence_ms, mid_thought_ms = EAGERNESS.get(turn.eagerness, EAGERNESS["auto"])
    else:
        complete_above = DEFAULT_COMPLETE_ABOVE
        silence_ms = turn.silence_duration_ms
        mid_thought_ms = silence_ms + DEFAULT_MID_THOUGHT_EXTRA_MS
    check_ms = min(SEMANTIC_CHECK_MS, silence_ms)
    return PauseRules(
        silence_ms=silence_ms,
        check_ms=check_ms,
        complete_above=complete_above,
        mid_thought_ms=mid_thought_ms,
        speculate_ms=None if speculate is None else min(speculate, check_ms),
    )
