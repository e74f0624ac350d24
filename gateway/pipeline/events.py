"""Events the stages report to the unit's owner (the Realtime session), from stage threads.

The unit delivers them on the event loop and drops any whose ``call_id`` is not its current
call, so a late event of an ended call never reaches the next caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gateway.models.base import ToolCall
from gateway.pipeline.latency import TurnLatency


@dataclass
class PipelineEvent:
    """Base of the stage-to-session events; ``call_id`` lets the unit drop a stale one.

    RealtimeSession.on_pipeline_event turns each into OpenAI Realtime API server events.
    """

    call_id: str


@dataclass
class SpeechStarted(PipelineEvent):
    """Server VAD heard ``min_speech_ms`` of speech, which began ``audio_start_ms`` into the
    call's input stream. Becomes ``input_audio_buffer.speech_started``. ``replies_seen``: the unit's
    newest response generation when it cut the reply for this start (None: not told); one asked
    after it was not cut. (Not ``generation``: that names the reply an event belongs to.)"""

    audio_start_ms: int = 0  # position in the caller's input stream
    replies_seen: Optional[int] = None


@dataclass
class SpeechStopped(PipelineEvent):
    """Server VAD heard ``silence_duration_ms`` of silence (or the turn hit ``max_utterance_s``);
    speech ended ``audio_end_ms`` into the input stream. Becomes ``input_audio_buffer.speech_stopped``."""

    audio_end_ms: int = 0


@dataclass
class InputCommitted(PipelineEvent):
    """A turn's audio went to STT (after server-VAD end of turn or a manual commit)."""

    audio_ms: int = 0


@dataclass
class TranscriptionCompleted(PipelineEvent):
    """STT text of the oldest committed turn not yet transcribed, with the turn's latency so far.

    Becomes ``conversation.item.input_audio_transcription.delta`` (if any text), ``.completed`` and
    ``conversation.item.done``; may then start a response (``turn_detection.create_response``).
    """

    transcript: str = ""
    latency: TurnLatency = field(default_factory=TurnLatency)


@dataclass
class TranscriptDrafted(PipelineEvent):
    """STT's text of the caller's turn so far, at a short pause (a speculative transcription),
    before the turn is known to be over. Never reported to the client: the session may have the
    LLM read the reply's prompt ahead (``PipelineControl.read_ahead``); the finished turn's
    :class:`TranscriptionCompleted` follows, with this text when the caller said nothing more.
    ``speaking``: a draft made while the caller still speaks (``gateway.pipeline.drafts``; at the
    turn's start one with no words, from the VAD stage): the prompt may be read ahead, but no reply
    started from it."""

    transcript: str = ""
    speaking: bool = False


@dataclass
class SpeechResumed(PipelineEvent):
    """The caller spoke on after a pause whose turn so far went to STT as a speculation: that draft
    no longer stands for the turn. For the unit (it discards a preemptive reply made from the
    draft, ``gateway.pool.preemptive``); nothing is sent to the client."""


@dataclass
class TranscriptionFailed(PipelineEvent):
    """A committed turn could not be transcribed (made by the session from an stt StageFailed, or
    by STT for a turn its full inbox dropped). Becomes ``conversation.item.input_audio_transcription.failed``."""

    message: str = ""


@dataclass
class ResponseTextDelta(PipelineEvent):
    """Text of a text-only response, as generated."""

    generation: int = 0
    delta: str = ""


@dataclass
class ResponseAudioTranscriptDelta(PipelineEvent):
    """Text whose audio has just been queued for playback."""

    generation: int = 0
    delta: str = ""


@dataclass
class ResponseFinished(PipelineEvent):
    """The LLM is done and any audio of the reply is queued (sent by TTS, the last stage).

    ``status`` is "completed", "incomplete" at the token cap or compute budget (``finish_reason``
    "length" or "budget"), or "failed" when the model ended it with no words, twice
    (``finish_reason`` "empty"; ``retried``: it was asked again once); cancelled replies send
    none. ``tool_calls`` are the function calls the model made (whole; arguments are JSON text
    valid for the tool's schema), after any words of ``text``. Becomes the response's
    ``*.done`` events (and a ``function_call`` output item per call), ending with ``response.done``.
    """

    generation: int = 0
    text: str = ""
    status: str = "completed"
    audio: bool = True
    output_tokens: int = 0
    tool_calls: list[ToolCall] = field(default_factory=list)
    input_tokens: int = 0  # the prompt's tokens, and of those ``cached_tokens`` reused (0: not known)
    cached_tokens: int = 0
    finish_reason: str = "stop"
    retried: bool = False


@dataclass
class PlaybackStarted(PipelineEvent):
    """The first audio frame of a response left the output track. Becomes
    ``output_audio_buffer.started`` (a server event of the Realtime API over WebRTC)."""

    generation: int = 0


@dataclass
class PlaybackStopped(PipelineEvent):
    """The last audio of a response left the track (played to the end)."""

    generation: int = 0
    played_ms: int = 0


@dataclass
class TurnLatencyMeasured(PipelineEvent):
    """Per-stage latency of a turn (``TurnLatency.as_ms()``, ms), once its first reply frame is sent,
    and where its time went (``detail_ms``: ``TurnLatency.waits_ms()``). Becomes ``gateway.latency``,
    a gateway extension absent from the Realtime API."""

    generation: int = 0
    latency_ms: dict = field(default_factory=dict)
    detail_ms: dict = field(default_factory=dict)


@dataclass
class StageFailed(PipelineEvent):
    """A stage raised on this call's input; the stage keeps running. ``message`` is the
    exception's text, for the server's log only: the client is told which stage failed, never this
    (it may hold an internal URL or an upstream server's error body)."""

    stage: str = ""
    message: str = ""
    generation: Optional[int] = None


@dataclass
class InputRejected(PipelineEvent):
    """A client request the pipeline cannot honour (e.g. commit of an empty buffer)."""

    code: str = ""
    message: str = ""


@dataclass
class Interruption:
    """What a cancel did: the generation cancelled and, if its audio was queued or playing, how much
    of it the caller heard (ms and the words spoken so far)."""

    generation: int
    audio_cleared: bool
    played_ms: int = 0
    heard_text: str = ""


@dataclass
class ResponseInterrupted(PipelineEvent):
    """Barge-in: caller speech cancelled the response (server VAD with ``interrupt_response``)."""

    interruption: Optional[Interruption] = None


@dataclass
class BargeInDecided(PipelineEvent):
    """Caller speech under the reply's audio was judged by its words (``gateway.pipeline.bargein``):
    ``decision`` "interrupted" (the reply is cancelled, as the usual events say) or "resumed" (it
    plays on; the speech was a backchannel or a noise and is no turn). ``transcript``: what was
    heard ("" when no words came in time); ``audio_start_ms`` where the speech began in the input
    stream, ``decided_ms`` how far into the input stream the decision came. Becomes
    ``gateway.barge_in``, a gateway extension absent from the Realtime API."""

    decision: str = ""
    transcript: str = ""
    audio_start_ms: int = 0
    decided_ms: int = 0
