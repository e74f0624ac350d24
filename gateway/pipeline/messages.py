"""Messages that travel through the stage queues VAD -> STT -> LLM -> TTS.

Every message is tagged with the id of the call it belongs to; a stage drops any message whose call is
not the unit's current one, so nothing of one caller can reach the next. Messages of a response also
carry its generation id (see ``gateway.pipeline.cancel.CancelScope``); a stage drops those of a cancelled
generation.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import ClassVar, Optional

import numpy as np

from gateway.config import config_default
from gateway.models.base import ChatMessage, GenerationOptions, HeardWord, ToolCall
from gateway.pipeline.call_settings import CallSettings
from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.preemption import ReplyHold


@dataclass
class Message:
    """Base of what travels between stages; ``call_id`` lets a stage skip an earlier call's leftovers.

    ``control`` messages (CallEnd) survive StageQueue.flush; ``droppable`` ones (AudioIn,
    Utterance) are dropped, oldest first, when a queue overflows (by count or by the audio it holds).
    """

    call_id: str
    # Control messages survive a queue flush; data messages may be dropped.
    control: ClassVar[bool] = False
    droppable: ClassVar[bool] = False

    @property
    def audio_samples(self) -> int:
        """Samples of caller audio the message holds (at the VAD's rate), what bounds a queue."""
        return 0

    def stand_in(self) -> Optional[Message]:
        """What a queue keeps in this message's place when it drops it (None: nothing), so that
        the stages after it still learn, in order, that it was dropped."""
        return None


@dataclass
class CallEnd(Message):
    """The tagged end-of-call marker of the quarantine-drain: each stage resets its per-call state
    as it passes, then forwards it.

    The unit returns to the pool only when its own marker (same ``call_id``: the ended call's, or a
    recovery's token) leaves the last stage.
    """

    control: ClassVar[bool] = True


@dataclass
class AudioIn(Message):
    """20 ms or so of caller audio: int16 mono samples at 16 kHz, ``received_at`` = time.monotonic()."""

    samples: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    received_at: float = 0.0
    droppable: ClassVar[bool] = True

    @property
    def audio_samples(self) -> int:
        return int(self.samples.size)


@dataclass
class CommitInput(Message):
    """Manual turn: end the caller's turn now (``input_audio_buffer.commit``)."""


@dataclass
class ClearInput(Message):
    """Drop the caller audio buffered so far (``input_audio_buffer.clear``)."""


@dataclass
class Utterance(Message):
    """One finished caller turn: float32 mono 16 kHz audio.

    ``speculative``: not a finished turn but the turn so far, sent at a short pause so that STT can
    start early; its text is never reported, only kept for the finished turn. ``speculation``: on a
    speculative utterance, its number (1, 2... per call); on a finished one, the number of the
    speculation whose text may stand for it (the caller said nothing more after it), else 0.
    ``probe``: a speculative utterance of speech under the reply's audio, whose text STT hands
    back at once (``StageContext.barge_in_heard``) to decide the barge-in. ``voided``: on a pause's
    speculative utterance, set by the VAD when the caller goes on after the pause (its text can no
    longer stand for the turn): STT skips it if it has not started yet. ``speaking``: a speculative
    utterance sent while the caller still speaks (``gateway.pipeline.drafts``): its text never stands
    for the turn, it only lets the LLM read the reply's prompt ahead; ``voided`` when a newer draft
    or the end of the turn overtook it. ``draft``: a draft's number (1, 2... per VAD stage); on a
    pause's speculative utterance, the number of the draft whose text is its transcript (cut in this
    pause, nothing but silence after it), 0 when STT must transcribe ``audio``.

    Droppable: a queue that holds too much audio drops the oldest; a finished turn leaves a
    :class:`TurnsDropped` in its place (its item's transcription fails, in commit order).
    """

    audio: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    latency: TurnLatency = field(default_factory=TurnLatency)
    speculative: bool = False
    speculation: int = 0
    probe: bool = False  # a speculative utterance whose text decides a barge-in (STT reports it back)
    voided: Optional[threading.Event] = None
    speaking: bool = False  # a draft of the turn so far while the caller still speaks
    draft: int = 0  # a draft's number; on a pause's speculative utterance, the draft that stands for it
    droppable: ClassVar[bool] = True

    @property
    def audio_samples(self) -> int:
        return int(self.audio.size)

    def stand_in(self) -> Optional[Message]:
        return None if self.speculative else TurnsDropped(self.call_id)


@dataclass
class TurnsDropped(Message):
    """``turns`` finished caller turns dropped unheard from a full STT queue (where they were):
    STT reports each one's transcription as failed."""

    turns: int = 1


@dataclass
class BargeInHeard(Message):
    """What barge-in probe ``speculation`` heard (STT -> the unit -> the VAD stage): its text and
    its words with the decoder's probability of each; ``trusted`` False when the decode looks wrong
    (``ScoredTranscript.trusted``: it decides nothing)."""

    speculation: int = 0
    transcript: str = ""
    words: tuple[HeardWord, ...] = ()
    trusted: bool = True


@dataclass
class ResponseRequest(Message):
    """Generate one response: the whole prompt (system + history), and how to say it: ``settings``
    are the call's when the response started (TTS speaks every sentence of it with their
    ``voice`` and ``speed``, whatever a later ``session.update`` sets); ``max_tokens`` and
    ``options`` are this response's own. ``hold``: set on a preemptive reply (started at the
    caller's pause, before the turn ended; ``gateway.pipeline.preemption``), None otherwise."""

    generation: int = 0
    messages: list[ChatMessage] = field(default_factory=list)
    max_tokens: int = config_default("max_response_tokens")
    audio: bool = True  # False: text only (``output_modalities: ["text"]``)
    settings: CallSettings = field(default_factory=CallSettings)
    latency: TurnLatency = field(default_factory=TurnLatency)
    options: GenerationOptions = field(default_factory=GenerationOptions)  # temperature, tools, tool_choice
    hold: Optional[ReplyHold] = None


@dataclass
class TextChunk(Message):
    """A sentence or clause of the reply, ready for TTS; ``settings`` and ``hold``: its response's
    (``ResponseRequest.settings``, ``ResponseRequest.hold``)."""

    generation: int = 0
    text: str = ""
    latency: TurnLatency = field(default_factory=TurnLatency)
    settings: CallSettings = field(default_factory=CallSettings)
    hold: Optional[ReplyHold] = None


@dataclass
class ResponseEnd(Message):
    """The LLM finished (or stopped); ``status`` is a Realtime response status."""

    generation: int = 0
    text: str = ""
    status: str = "completed"
    audio: bool = True
    output_tokens: int = 0
    tool_calls: list[ToolCall] = field(default_factory=list)  # calls the model made instead of (or after) text
    input_tokens: int = 0  # the prompt's tokens (0: the engine does not say)
    cached_tokens: int = 0  # of those, how many were reused from the cache rather than read
    # why it ended: the engine's (stop, length, budget, cancelled, tool_calls), or "empty": the
    # model ended it twice with no words (``status`` "failed"); ``retried``: asked again for that
    finish_reason: str = "stop"
    retried: bool = False
