"""The table-driven Realtime protocol harness: a started RealtimeSession on a
PipelineControlDouble, and the steps (client events, pipeline events) rows are made of."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Optional, Union

from gateway.pipeline import events as pe
from gateway.realtime.session import RealtimeSession
from tests.doubles import PipelineControlDouble, TimersDouble

SID = "sess-under-test"
LOCAL = {"llm": "smollm2-135m", "stt": "whisper-base", "voice": "joe"}
ID_SHAPE = re.compile(r"^(event|item|resp|sess|conv)_[A-Za-z0-9]{21}$")


Step = Union[dict, str, bytes, Callable[["Harness"], Any]]


class Harness:
    """A started RealtimeSession on a PipelineControlDouble, recording what it sends."""

    def __init__(self, extensions: frozenset[str] = frozenset()) -> None:
        self.pipeline = PipelineControlDouble(call_id=SID)
        self.timers = TimersDouble()
        self.sent: list[dict] = []
        self.last_client_id: Optional[str] = None  # event_id of the last client event sent
        self.rt = RealtimeSession(
            self.pipeline,
            self.sent.append,
            local_models=LOCAL,
            call_later=self.timers.call_later,
            clock=self.timers.clock,
            extensions=extensions,
        )
        self.rt.start()

    def run(self, step: Step) -> list[dict]:
        """Apply one step (client event, raw client text, or a pipeline event / action); return
        the server events it caused."""
        mark = len(self.sent)
        if isinstance(step, dict):
            self.last_client_id = step.get("event_id")
            self.rt.handle_client_message(json.dumps(step))
        elif isinstance(step, (str, bytes)):
            self.last_client_id = None
            self.rt.handle_client_message(step)
        else:
            event = step(self)
            if isinstance(event, pe.PipelineEvent):
                self.rt.on_pipeline_event(event)
        return self.sent[mark:]

    def last(self, event_type: str) -> dict:
        return [e for e in self.sent if e["type"] == event_type][-1]


# ---------------------------------------------------------------- steps
def client(event_type: str, event_id: Optional[str] = None, **fields: Any) -> dict:
    event = {"type": event_type, **fields}
    if event_id:
        event["event_id"] = event_id
    return event


def user_text(text: str = "What is the capital of France?", **fields: Any) -> dict:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return client("conversation.item.create", item=item, **fields)


def speech_started(ms: int = 1000) -> Step:
    return lambda h: pe.SpeechStarted(SID, audio_start_ms=ms)


def speech_stopped(ms: int = 2500) -> Step:
    return lambda h: pe.SpeechStopped(SID, audio_end_ms=ms)


def committed(audio_ms: int = 1800) -> Step:
    return lambda h: pe.InputCommitted(SID, audio_ms=audio_ms)


def transcribed(text: str = "What is the capital of France?") -> Step:
    return lambda h: pe.TranscriptionCompleted(SID, transcript=text)


def rejected_empty_commit() -> Step:
    return lambda h: pe.InputRejected(SID, code="input_audio_buffer_commit_empty", message="buffer is empty")


def said(text: str) -> Step:
    return lambda h: pe.ResponseAudioTranscriptDelta(SID, generation=h.pipeline.generation, delta=text)


def wrote(text: str) -> Step:
    return lambda h: pe.ResponseTextDelta(SID, generation=h.pipeline.generation, delta=text)


def playback_started(played_ms: int = 600, heard: str = "Paris") -> Step:
    def step(h: Harness) -> Any:
        h.pipeline.play(played_ms, heard)
        return pe.PlaybackStarted(SID, generation=h.pipeline.generation)

    return step


def finished(
    text: str = "Paris is the capital.",
    status: str = "completed",
    tokens: int = 6,
    audio: bool = True,
    finish_reason: Optional[str] = None,
    retried: bool = False,
) -> Step:
    """The pipeline's ``ResponseFinished`` (``finish_reason`` None: "length" for an incomplete
    reply, the token cap, else "stop")."""
    reason = finish_reason or ("length" if status == "incomplete" else "stop")

    def step(h: Harness) -> Any:
        h.pipeline.live = False  # the unit finishes the generation's scope on ResponseFinished
        return pe.ResponseFinished(
            SID,
            generation=h.pipeline.generation,
            text=text,
            status=status,
            audio=audio,
            output_tokens=tokens,
            finish_reason=reason,
            retried=retried,
        )

    return step


def playback_stopped(played_ms: int = 1500) -> Step:
    def step(h: Harness) -> Any:
        h.pipeline.audio = None
        return pe.PlaybackStopped(SID, generation=h.pipeline.generation, played_ms=played_ms)

    return step


def barge_in() -> Step:
    def step(h: Harness) -> Any:
        return pe.ResponseInterrupted(SID, interruption=h.pipeline.interrupt())

    return step


# ---------------------------------------------------------------- states rows start from
def fresh(h: Harness) -> None:
    pass


def with_user_item(h: Harness) -> None:
    h.run(user_text())


def responding(h: Harness) -> None:
    with_user_item(h)
    h.run(client("response.create"))


def speaking(h: Harness) -> None:
    responding(h)
    h.run(said("Paris is the capital."))
    h.run(playback_started())


def answered(h: Harness) -> None:
    speaking(h)
    h.run(finished())
    h.run(playback_stopped(1500))


def answer_still_playing(h: Harness) -> None:
    speaking(h)
    h.run(finished())


def manual_turns(h: Harness) -> None:
    h.run(client("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}))


def text_only(h: Harness) -> None:
    h.run(client("session.update", session={"type": "realtime", "output_modalities": ["text"]}))


# ---------------------------------------------------------------- server event sequences rows expect
RESPONSE_START = [
    "response.created",
    "response.output_item.added",
    "conversation.item.added",
    "response.content_part.added",
]
AUDIO_RESPONSE_END = [
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
    "rate_limits.updated",
]
TEXT_RESPONSE_END = [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
    "rate_limits.updated",
]
TRANSCRIBED = [
    "conversation.item.input_audio_transcription.delta",
    "conversation.item.input_audio_transcription.completed",
    "conversation.item.done",
]
