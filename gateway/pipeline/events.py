"""Events the stages report to the unit's owner (the Realtime session), from stage threads.

The unit delivers them on the event loop and drops any whose ``session_id`` is not its current
session, so a late event of an ended call never reaches the next caller.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from gateway.pipeline.latency import TurnLatency


@dataclass
class PipelineEvent:
    session_id: str


@dataclass
class SpeechStarted(PipelineEvent):
    audio_start_ms: int = 0  # position in the caller's input stream


@dataclass
class SpeechStopped(PipelineEvent):
    audio_end_ms: int = 0


@dataclass
class InputCommitted(PipelineEvent):
    """A turn's audio went to STT (after server-VAD end of turn or a manual commit)."""

    audio_ms: int = 0


@dataclass
class TranscriptionCompleted(PipelineEvent):
    transcript: str = ""
    latency: TurnLatency = field(default_factory=TurnLatency)


@dataclass
class TranscriptionFailed(PipelineEvent):
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
    generation: int = 0
    text: str = ""
    status: str = "completed"
    audio: bool = True
    output_tokens: int = 0


@dataclass
class PlaybackStarted(PipelineEvent):
    generation: int = 0


@dataclass
class PlaybackStopped(PipelineEvent):
    """The last audio of a response left the track (played to the end)."""

    generation: int = 0
    played_ms: int = 0


@dataclass
class PlaybackCleared(PipelineEvent):
    """Unplayed reply audio was dropped (barge-in or ``output_audio_buffer.clear``)."""

    generation: int = 0
    played_ms: int = 0
    heard_text: str = ""


@dataclass
class TurnLatencyMeasured(PipelineEvent):
    generation: int = 0
    latency_ms: dict = field(default_factory=dict)


@dataclass
class StageFailed(PipelineEvent):
    """A stage raised on this session's input; the stage keeps running."""

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
