"""Issue 4: the OpenAI Realtime protocol of RealtimeSession, table-driven.

Each row drives one session (no sockets, no models) with client events and pipeline events and
asserts the exact sequence of server event types it sends. ``FakePipeline`` is a test double of
the PipelineControl interface: it records what the session asks of the pipeline and answers
``interrupt()`` as a unit would for the state the row put it in.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

import pytest

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage
from gateway.pipeline import events as pe
from gateway.pool.session import SessionState
from gateway.realtime.session import MAX_CLIENT_MESSAGE_BYTES, RealtimeSession

SID = "sess-under-test"
LOCAL = {"llm": "smollm2-135m", "stt": "whisper-base", "voice": "joe"}
ID_SHAPE = re.compile(r"^(event|item|resp|sess|conv)_[A-Za-z0-9]{21}$")


class FakePipeline:
    """Test double of ``PipelineControl`` (what PipelineUnit offers the protocol layer).

    Records every call in ``calls`` and every response request in ``requests``; ``interrupt()``
    reports the queued or playing reply audio that ``play()`` set up, as the unit's playout would.
    """

    def __init__(self, config: Optional[GatewayConfig] = None) -> None:
        self.session = SessionState.for_call(SID, config or GatewayConfig())
        self.calls: list[str] = []
        self.requests: list[tuple[list[ChatMessage], bool, int]] = []  # (messages, audio, max_tokens)
        self.generation = 0
        self.live = False
        self.audio: Optional[tuple[int, int, str]] = None  # (generation, played_ms, heard text)
        self.touches = 0
        original_touch = self.session.touch

        def touch() -> None:
            self.touches += 1
            original_touch()

        self.session.touch = touch

    def commit_input(self) -> None:
        self.calls.append("commit_input")

    def clear_input(self) -> None:
        self.calls.append("clear_input")

    def create_response(self, messages: list[ChatMessage], audio: bool = True, latency=None) -> int:
        self.calls.append("create_response")
        self.generation += 1
        self.live = True
        self.audio = None  # a new generation makes older queued audio stale
        self.requests.append((messages, audio, self.session.max_tokens))
        return self.generation

    def interrupt(self) -> Optional[pe.Interruption]:
        self.calls.append("interrupt")
        was_live, audio = self.live, self.audio
        self.live, self.audio = False, None
        if audio is not None:
            return pe.Interruption(audio[0], audio_cleared=True, played_ms=audio[1], heard_text=audio[2])
        return pe.Interruption(self.generation, audio_cleared=False) if was_live else None

    def play(self, played_ms: int, heard: str) -> None:
        """The current generation's audio is queued/playing (what the caller heard so far)."""
        self.audio = (self.generation, played_ms, heard)


class FakeTimers:
    """A manual clock and ``call_later`` for the idle timeout."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pending: list[list] = []  # [due, callback, cancelled]

    def clock(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]):
        entry = [self.now + delay, callback, False]
        self.pending.append(entry)

        class Handle:
            def cancel(self_inner) -> None:
                entry[2] = True

        return Handle()

    def advance(self, seconds: float) -> None:
        """Move the clock on and run what fell due, in order."""
        target = self.now + seconds
        while True:
            due = sorted((e for e in self.pending if not e[2] and e[0] <= target), key=lambda e: e[0])
            if not due:
                break
            entry = due[0]
            entry[2] = True
            self.now = entry[0]
            entry[1]()
        self.now = target

    @property
    def armed(self) -> int:
        return sum(1 for e in self.pending if not e[2])


Step = Union[dict, str, Callable[["Harness"], Any]]


class Harness:
    """A started RealtimeSession on a FakePipeline, recording what it sends."""

    def __init__(self) -> None:
        self.pipeline = FakePipeline()
        self.timers = FakeTimers()
        self.sent: list[dict] = []
        self.last_client_id: Optional[str] = None  # event_id of the last client event sent
        self.rt = RealtimeSession(self.pipeline, self.sent.append, local_models=LOCAL,
                                  call_later=self.timers.call_later, clock=self.timers.clock)
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
def client(event_type: str, event_id: Optional[str] = None, **fields) -> dict:
    event = {"type": event_type, **fields}
    if event_id:
        event["event_id"] = event_id
    return event


def user_text(text: str = "What is the capital of France?", **fields) -> dict:
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
    def step(h: Harness):
        h.pipeline.play(played_ms, heard)
        return pe.PlaybackStarted(SID, generation=h.pipeline.generation)

    return step


def finished(text: str = "Paris is the capital.", status: str = "completed", tokens: int = 6, audio: bool = True) -> Step:
    def step(h: Harness):
        h.pipeline.live = False  # the unit finishes the generation's scope on ResponseFinished
        return pe.ResponseFinished(SID, generation=h.pipeline.generation, text=text, status=status, audio=audio,
                                   output_tokens=tokens)

    return step


def playback_stopped(played_ms: int = 1500) -> Step:
    def step(h: Harness):
        h.pipeline.audio = None
        return pe.PlaybackStopped(SID, generation=h.pipeline.generation, played_ms=played_ms)

    return step


def barge_in() -> Step:
    def step(h: Harness):
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


# ---------------------------------------------------------------- the table
RESPONSE_START = ["response.created", "response.output_item.added", "conversation.item.added", "response.content_part.added"]
AUDIO_RESPONSE_END = ["response.output_audio.done", "response.output_audio_transcript.done", "response.content_part.done",
                      "response.output_item.done", "conversation.item.done", "response.done", "rate_limits.updated"]
TEXT_RESPONSE_END = ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                     "conversation.item.done", "response.done", "rate_limits.updated"]
TRANSCRIBED = ["conversation.item.input_audio_transcription.delta", "conversation.item.input_audio_transcription.completed",
               "conversation.item.done"]


@dataclass
class Row:
    id: str
    given: Callable[[Harness], None]
    steps: list[Step]
    expected: list[str]
    error_code: Optional[str] = None  # for rows that end in an error: its code (and the echo is checked)


ROWS = [
    # session.update
    Row("session.update", fresh, [client("session.update", "evt_c1", session={"type": "realtime", "instructions": "Be brief."})],
        ["session.updated"]),
    Row("session.update/invalid", fresh,
        [client("session.update", "evt_c2", session={"type": "realtime", "audio": {"output": {"speed": "fast"}}})],
        ["error"], "invalid_value"),
    Row("session.update/not-an-object", fresh, [client("session.update", "evt_c3", session="realtime")], ["error"], "invalid_value"),
    # input_audio_buffer.*
    Row("input_audio_buffer.append", fresh, [client("input_audio_buffer.append", "evt_c4", audio="AAAA")],
        ["error"], "unsupported_event"),
    Row("input_audio_buffer.commit", fresh, [client("input_audio_buffer.commit", "evt_c5"), committed(), transcribed()],
        ["input_audio_buffer.committed", "conversation.item.added", *TRANSCRIBED, *RESPONSE_START]),
    Row("input_audio_buffer.commit/empty", fresh, [client("input_audio_buffer.commit", "evt_c6"), rejected_empty_commit()],
        ["error"], "input_audio_buffer_commit_empty"),
    Row("input_audio_buffer.clear", fresh, [client("input_audio_buffer.clear", "evt_c7")], ["input_audio_buffer.cleared"]),
    # output_audio_buffer.clear
    Row("output_audio_buffer.clear/while-answering", speaking, [client("output_audio_buffer.clear", "evt_c8")],
        ["output_audio_buffer.cleared", *AUDIO_RESPONSE_END]),
    Row("output_audio_buffer.clear/answer-done-still-playing", answer_still_playing,
        [client("output_audio_buffer.clear", "evt_c9")], ["output_audio_buffer.cleared"]),
    Row("output_audio_buffer.clear/nothing-playing", answered, [client("output_audio_buffer.clear", "evt_c10")], []),
    # conversation.item.*
    Row("conversation.item.create", fresh, [user_text(event_id="evt_c11")], ["conversation.item.added", "conversation.item.done"]),
    Row("conversation.item.create/bad-content", fresh,
        [client("conversation.item.create", "evt_c12", item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": 7}]})],
        ["error"], "invalid_type"),
    Row("conversation.item.create/unknown-previous", fresh, [user_text(event_id="evt_c13", previous_item_id="item_nope")],
        ["error"], "item_not_found"),
    Row("conversation.item.retrieve", with_user_item, [lambda h: h.run(client("conversation.item.retrieve", item_id=h.rt.items[0]["id"]))],
        ["conversation.item.retrieved"]),
    Row("conversation.item.retrieve/unknown", fresh, [client("conversation.item.retrieve", "evt_c14", item_id="item_nope")],
        ["error"], "item_not_found"),
    Row("conversation.item.truncate", answered,
        [lambda h: h.run(client("conversation.item.truncate", item_id=h.rt.items[-1]["id"], content_index=0, audio_end_ms=500))],
        ["conversation.item.truncated"]),
    Row("conversation.item.truncate/past-the-audio", answered,
        [lambda h: h.run(client("conversation.item.truncate", "evt_c15", item_id=h.rt.items[-1]["id"], content_index=0,
                                audio_end_ms=99_000))],
        ["error"], "invalid_value"),
    Row("conversation.item.truncate/user-item", with_user_item,
        [lambda h: h.run(client("conversation.item.truncate", "evt_c16", item_id=h.rt.items[0]["id"], content_index=0, audio_end_ms=0))],
        ["error"], "invalid_value"),
    Row("conversation.item.delete", with_user_item, [lambda h: h.run(client("conversation.item.delete", item_id=h.rt.items[0]["id"]))],
        ["conversation.item.deleted"]),
    Row("conversation.item.delete/missing-id", fresh, [client("conversation.item.delete", "evt_c17")],
        ["error"], "missing_required_parameter"),
    Row("conversation.item.retrieve/wrong-type", fresh, [client("conversation.item.retrieve", "evt_c25", item_id=42)],
        ["error"], "invalid_type"),
    # response.*
    Row("response.create/spoken", with_user_item,
        [client("response.create", "evt_c18"), said("Paris is the capital."), playback_started(), finished(), playback_stopped()],
        [*RESPONSE_START, "response.output_audio_transcript.delta", "output_audio_buffer.started", *AUDIO_RESPONSE_END,
         "output_audio_buffer.stopped"]),
    Row("response.create/text-only", with_user_item,
        [client("response.create", response={"output_modalities": ["text"]}), wrote("Paris."), finished("Paris.", audio=False)],
        [*RESPONSE_START, "response.output_text.delta", *TEXT_RESPONSE_END]),
    Row("response.create/out-of-band", with_user_item,
        [client("response.create", response={"conversation": "none", "output_modalities": ["text"], "metadata": {"k": "v"}}),
         finished("Summary.", audio=False)],
        ["response.created", "response.output_item.added", "response.content_part.added", "response.output_text.done",
         "response.content_part.done", "response.output_item.done", "response.done", "rate_limits.updated"]),
    Row("response.create/while-active", responding, [client("response.create", "evt_c19")],
        ["error"], "conversation_already_has_active_response"),
    Row("response.create/bad-modalities", with_user_item,
        [client("response.create", "evt_c20", response={"output_modalities": ["video"]})], ["error"], "invalid_value"),
    Row("response.cancel", speaking, [client("response.cancel", "evt_c21")], ["output_audio_buffer.cleared", *AUDIO_RESPONSE_END]),
    Row("response.cancel/before-audio", responding, [client("response.cancel")], AUDIO_RESPONSE_END),
    Row("response.cancel/done-but-still-playing", answer_still_playing, [client("response.cancel")],
        ["output_audio_buffer.cleared"]),
    Row("response.cancel/nothing-active", answered, [client("response.cancel", "evt_c22")], ["error"], "response_cancel_not_active"),
    # malformed messages
    Row("bad-json", fresh, ['{"type": "response.create",'], ["error"], "invalid_json"),
    Row("not-an-object", fresh, ["[1, 2, 3]"], ["error"], "invalid_event"),
    Row("unknown-type", fresh, [client("response.explode", "evt_c23")], ["error"], "invalid_value"),
    Row("missing-type", fresh, [{"event_id": "evt_c24", "item": {}}], ["error"], "missing_required_parameter"),
    Row("oversize", fresh, [json.dumps(client("session.update", session={"instructions": "x" * MAX_CLIENT_MESSAGE_BYTES}))],
        ["error"], "message_too_large"),
    Row("binary-not-utf8", fresh, [b"\xff\xfe\x00"], ["error"], "invalid_json"),
    # server VAD turns and barge-in (pipeline events)
    Row("server-vad-turn", fresh, [speech_started(), speech_stopped(), committed(), transcribed()],
        ["input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped", "input_audio_buffer.committed",
         "conversation.item.added", *TRANSCRIBED, *RESPONSE_START]),
    Row("barge-in", speaking, [speech_started(), barge_in()],
        ["input_audio_buffer.speech_started", "output_audio_buffer.cleared", *AUDIO_RESPONSE_END]),
    Row("manual-turn/no-auto-response", manual_turns, [client("input_audio_buffer.commit"), committed(), transcribed()],
        ["input_audio_buffer.committed", "conversation.item.added", *TRANSCRIBED]),
    Row("transcription-failed", fresh, [committed(), lambda h: pe.TranscriptionFailed(SID, message="decoder error")],
        ["input_audio_buffer.committed", "conversation.item.added", "conversation.item.input_audio_transcription.failed"]),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_client_event_gives_expected_server_events(row: Row):
    h = Harness()
    row.given(h)
    mark = len(h.sent)
    for step in row.steps:
        h.run(step)
    events = h.sent[mark:]
    assert [e["type"] for e in events] == row.expected
    for event in events:
        assert ID_SHAPE.match(event["event_id"]) and event["event_id"].startswith("event_"), event
    if row.error_code is not None:
        error = events[-1]["error"]
        assert error["code"] == row.error_code, error
        assert error["type"] == "invalid_request_error" and error["message"]
        assert error["event_id"] == h.last_client_id, "the error must echo the client event_id that caused it"
    # The session is still usable after every row (errors never end it).
    assert [e["type"] for e in h.run(client("input_audio_buffer.clear"))] == ["input_audio_buffer.cleared"]


# ---------------------------------------------------------------- ids and shapes
def test_ids_follow_openai_shapes_and_reference_each_other():
    h = Harness()
    assert h.sent[0]["type"] == "session.created" and ID_SHAPE.match(h.sent[0]["session"]["id"])
    assert h.sent[0]["session"]["id"].startswith("sess_")
    for step in [speech_started(), speech_stopped(), committed(), transcribed(), said("Paris."), playback_started(),
                 finished("Paris."), playback_stopped()]:
        h.run(step)
    started = h.last("input_audio_buffer.speech_started")
    user_item = h.last("input_audio_buffer.committed")["item_id"]
    assert user_item.startswith("item_") and ID_SHAPE.match(user_item)
    assert started["item_id"] == user_item == h.last("conversation.item.input_audio_transcription.completed")["item_id"]
    assert h.last("input_audio_buffer.committed")["previous_item_id"] is None
    created = h.last("response.created")["response"]
    assert created["id"].startswith("resp_") and ID_SHAPE.match(created["id"])
    assert created["status"] == "in_progress" and created["object"] == "realtime.response"
    assert created["conversation_id"].startswith("conv_") and created["output_modalities"] == ["audio"]
    assistant = h.last("response.output_item.added")["item"]
    assert assistant["id"].startswith("item_") and assistant["role"] == "assistant" and assistant["status"] == "in_progress"
    assert h.last("conversation.item.added")["previous_item_id"] == user_item
    for name in ("response.output_audio_transcript.delta", "response.output_audio.done", "response.content_part.done"):
        event = h.last(name)
        assert (event["response_id"], event["item_id"], event["output_index"], event["content_index"]) == (
            created["id"], assistant["id"], 0, 0)
    for name in ("output_audio_buffer.started", "output_audio_buffer.stopped"):
        assert h.last(name)["response_id"] == created["id"]
    done = h.last("response.done")["response"]
    assert done["id"] == created["id"] and done["status"] == "completed" and done["status_details"] is None
    assert done["output"][0]["content"] == [{"type": "output_audio", "transcript": "Paris."}]
    assert done["usage"]["output_tokens"] == 6 and done["usage"]["total_tokens"] == 6
    limits = h.last("rate_limits.updated")["rate_limits"]
    assert {limit["name"] for limit in limits} == {"requests", "tokens"}
    assert all(set(limit) == {"name", "limit", "remaining", "reset_seconds"} for limit in limits)
    completed = h.last("conversation.item.input_audio_transcription.completed")
    assert completed["usage"] == {"type": "duration", "seconds": 1.8}


def test_cancelled_and_incomplete_responses_say_why():
    h = Harness()
    speaking(h)
    h.run(client("response.cancel"))
    done = h.last("response.done")["response"]
    assert done["status"] == "cancelled" and done["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    # Only what the caller heard stays in the conversation.
    assert done["output"][0]["content"][0]["transcript"] == "Paris"
    assert h.rt.items[-1]["content"][0]["transcript"] == "Paris"
    h.run(client("response.create"))
    h.run(said("A long"))
    h.run(finished("A long", status="incomplete"))
    done = h.last("response.done")["response"]
    assert done["status"] == "incomplete" and done["status_details"]["reason"] == "max_output_tokens"


def test_barge_in_reason_is_turn_detected():
    h = Harness()
    speaking(h)
    h.run(speech_started())
    h.run(barge_in())
    assert h.last("response.done")["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}


def test_failed_stage_fails_the_response():
    h = Harness()
    responding(h)
    events = h.run(lambda h: pe.StageFailed(SID, stage="llm", message="out of memory", generation=h.pipeline.generation))
    assert [e["type"] for e in events] == ["error", *AUDIO_RESPONSE_END]
    assert events[0]["error"]["type"] == "server_error"
    assert h.last("response.done")["response"]["status"] == "failed"


# ---------------------------------------------------------------- session.update semantics
GA_STOCK_SESSION = {
    "type": "realtime",
    "model": "gpt-realtime",
    "instructions": "You are terse.",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "format": {"type": "audio/pcm", "rate": 24000},
            "transcription": {"model": "gpt-4o-mini-transcribe"},
            "turn_detection": {"type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200, "silence_duration_ms": 700,
                               "create_response": True, "interrupt_response": False, "idle_timeout_ms": 8000},
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin", "speed": 1.2},
    },
}


def test_stock_openai_names_map_to_what_is_really_used():
    h = Harness()
    session = h.run(client("session.update", session=GA_STOCK_SESSION))[-1]["session"]
    assert session["model"] == "smollm2-135m"
    assert session["audio"]["input"]["transcription"]["model"] == "whisper-base"
    assert session["audio"]["output"]["voice"] == "joe"
    assert session["audio"]["output"]["speed"] == 1.2 and session["instructions"] == "You are terse."
    assert session["audio"]["input"]["turn_detection"] == {
        "type": "server_vad", "threshold": 0.6, "prefix_padding_ms": 200, "silence_duration_ms": 700,
        "idle_timeout_ms": 8000, "create_response": True, "interrupt_response": False}
    turn = h.pipeline.session.turn
    assert (turn.threshold, turn.prefix_padding_ms, turn.silence_duration_ms, turn.interrupt_response) == (0.6, 200, 700, False)
    assert h.pipeline.session.instructions == "You are terse." and h.pipeline.session.speed == 1.2
    # The GA session shape of OpenAI's examples.
    assert {"type", "object", "id", "model", "output_modalities", "instructions", "tools", "tool_choice",
            "max_output_tokens", "audio"} <= set(session)


def test_invalid_update_names_the_field_and_keeps_previous_settings():
    h = Harness()
    h.run(client("session.update", session=GA_STOCK_SESSION))
    before = h.rt.describe()
    bad = {"type": "realtime", "instructions": "Changed!",
           "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": "long"}}}}
    error = h.run(client("session.update", "evt_bad", session=bad))[-1]
    assert error["type"] == "error" and error["error"]["event_id"] == "evt_bad"
    assert error["error"]["param"] == "session.audio.input.turn_detection.silence_duration_ms"
    assert "silence_duration_ms" in error["error"]["message"]
    assert h.rt.describe() == before
    assert h.pipeline.session.instructions == "You are terse."
    assert h.pipeline.session.turn.silence_duration_ms == 700


@pytest.mark.parametrize("session,param", [
    ({"type": "realtime", "output_modalities": ["video"]}, "session.output_modalities[0]"),
    ({"type": "realtime", "audio": {"output": {"speed": 3.0}}}, "session.audio.output.speed"),
    ({"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": "high"}}}},
     "session.audio.input.turn_detection.threshold"),
    ({"type": "realtime", "audio": {"input": {"turn_detection": {"type": "magic_vad"}}}}, "session.audio.input.turn_detection"),
    ({"type": "realtime", "audio": {"input": {"format": {"type": "audio/mp3"}}}}, "session.audio.input.format.type"),
    ({"type": "realtime", "max_output_tokens": 0}, "session.max_output_tokens"),
    ({"type": "realtime", "instructions": 42}, "session.instructions"),
    ({"modalities": ["text"], "turn_detection": {"type": "server_vad", "create_response": "yes"}},
     "session.turn_detection.create_response"),
])
def test_structurally_invalid_values_name_the_field(session, param):
    h = Harness()
    error = h.run(client("session.update", session=session))[-1]
    assert error["type"] == "error" and error["error"]["param"] == param, error


def test_turn_detection_replaces_the_old_one_and_semantic_vad_maps_to_server_vad():
    h = Harness()
    h.run(client("session.update", session=GA_STOCK_SESSION))
    semantic = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "high"}}}}
    session = h.run(client("session.update", session=semantic))[-1]["session"]
    assert session["audio"]["input"]["turn_detection"] == {"type": "semantic_vad", "eagerness": "high",
                                                           "create_response": True, "interrupt_response": True}
    turn = h.pipeline.session.turn
    assert turn.mode == "server_vad" and turn.silence_duration_ms == 300 and turn.idle_timeout_ms is None
    plain = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 0.7}}}}
    session = h.run(client("session.update", session=plain))[-1]["session"]
    # Fields the new object leaves out are back to the gateway's defaults.
    assert session["audio"]["input"]["turn_detection"]["silence_duration_ms"] == GatewayConfig().silence_duration_ms
    assert session["audio"]["input"]["turn_detection"]["threshold"] == 0.7


def test_max_output_tokens_inf_means_the_configured_cap():
    h = Harness()
    cap = GatewayConfig().max_response_tokens
    assert h.run(client("session.update", session={"type": "realtime", "max_output_tokens": "inf"}))[-1]["session"][
        "max_output_tokens"] == cap
    assert h.run(client("session.update", session={"type": "realtime", "max_output_tokens": 20}))[-1]["session"][
        "max_output_tokens"] == 20
    h.run(user_text())
    h.run(client("response.create", response={"max_output_tokens": 5}))
    assert h.pipeline.requests[-1][2] == 5, "a response's own cap reaches the pipeline"
    assert h.pipeline.session.max_tokens == 20, "and does not change the session's"


def test_beta_session_gets_beta_names_and_shapes():
    h = Harness()
    beta = {"modalities": ["text", "audio"], "voice": "alloy", "input_audio_format": "g711_ulaw",
            "input_audio_transcription": {"model": "whisper-1"}, "turn_detection": {"type": "server_vad"}}
    session = h.run(client("session.update", session=beta))[-1]["session"]
    assert session["voice"] == "joe" and session["modalities"] == ["text", "audio"]
    assert session["input_audio_format"] == "g711_ulaw" and session["output_audio_format"] == "pcm16"
    assert session["input_audio_transcription"]["model"] == "whisper-base" and "audio" not in session
    # A later update with only shared keys keeps the beta dialect.
    assert "modalities" in h.run(client("session.update", session={"instructions": "Hi."}))[-1]["session"]
    h.run(user_text())
    assert h.sent[-1]["type"] == "conversation.item.created", "beta alias of conversation.item.added; no item.done"
    types = [e["type"] for e in h.run(client("response.create")) + h.run(said("Hello.")) + h.run(playback_started())
             + h.run(finished("Hello."))]
    assert types == ["response.created", "response.output_item.added", "conversation.item.created", "response.content_part.added",
                     "response.audio_transcript.delta", "output_audio_buffer.started", "response.audio.done",
                     "response.audio_transcript.done", "response.content_part.done", "response.output_item.done",
                     "response.done", "rate_limits.updated"]
    done = h.last("response.done")["response"]
    assert done["modalities"] == ["text", "audio"] and done["output"][0]["content"][0]["type"] == "audio"
    h.run(client("response.create", response={"modalities": ["text"]}))
    h.run(wrote("Hi."))
    assert h.sent[-1]["type"] == "response.text.delta"


# ---------------------------------------------------------------- turn handling
def test_manual_turns_wait_for_commit_and_response_create():
    h = Harness()
    manual_turns(h)
    assert h.last("session.updated")["session"]["audio"]["input"]["turn_detection"] is None
    assert h.pipeline.session.turn.mode == "manual"
    h.run(client("input_audio_buffer.commit"))
    assert h.pipeline.calls == ["commit_input"]
    h.run(committed())
    # The client asks for the answer before the transcript is ready: the response is created at
    # once but reaches the LLM only with the caller's words in the prompt.
    assert [e["type"] for e in h.run(client("response.create"))] == RESPONSE_START
    assert "create_response" not in h.pipeline.calls
    h.run(transcribed("What is two plus two?"))
    messages = h.pipeline.requests[-1][0]
    assert messages[-1] == ChatMessage("user", "What is two plus two?")


def test_text_conversation_prompt_and_text_only_session():
    h = Harness()
    text_only(h)
    h.run(user_text("Say hi."))
    h.run(client("response.create"))
    messages, audio, _ = h.pipeline.requests[-1]
    assert audio is False
    assert messages[0].role == "system" and messages[-1] == ChatMessage("user", "Say hi.")
    assert h.last("response.content_part.added")["part"] == {"type": "text", "text": ""}


def test_response_input_item_reference_and_instructions():
    h = Harness()
    h.run(user_text("The sky is blue."))
    first = h.rt.items[0]["id"]
    h.run(client("response.create", response={
        "conversation": "none", "instructions": "Summarise.", "output_modalities": ["text"],
        "input": [{"type": "item_reference", "id": first},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "One word."}]}]}))
    messages = h.pipeline.requests[-1][0]
    assert messages == [ChatMessage("system", "Summarise."), ChatMessage("user", "The sky is blue."), ChatMessage("user", "One word.")]
    cancelled = h.run(client("response.cancel"))
    assert "response.done" in [e["type"] for e in cancelled]
    bad = h.run(client("response.create", "evt_ref", response={"input": [{"type": "item_reference", "id": "item_missing"}]}))
    assert bad[-1]["error"]["code"] == "item_not_found" and bad[-1]["error"]["event_id"] == "evt_ref"


def test_idle_timeout_triggers_a_response_after_playback_ends():
    h = Harness()
    update = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 6000}}}}
    h.run(client("session.update", session=update))
    h.timers.advance(1.0)
    answered(h)  # a turn: the idle clock restarts when its audio has finished playing
    assert h.timers.armed == 2  # the timeout, and the half-way keep-alive of the call's watchdog
    touches = h.pipeline.touches
    h.timers.advance(5.9)
    assert not [e for e in h.sent if e["type"] == "input_audio_buffer.timeout_triggered"]
    assert h.pipeline.touches > touches, "the call's idle watchdog is kept off while the timeout is pending"
    mark = len(h.sent)
    h.timers.advance(0.2)
    events = h.sent[mark:]
    assert [e["type"] for e in events] == [
        "input_audio_buffer.timeout_triggered", "input_audio_buffer.committed", "conversation.item.added",
        "conversation.item.input_audio_transcription.completed", "conversation.item.done", *RESPONSE_START]
    triggered = events[0]
    assert triggered["item_id"] == events[1]["item_id"] and triggered["item_id"].startswith("item_")
    assert abs((triggered["audio_end_ms"] - triggered["audio_start_ms"]) - 6000) <= 50
    assert "silent" in h.pipeline.requests[-1][0][-1].content or "nothing" in h.pipeline.requests[-1][0][-1].content


def test_idle_timeout_is_reset_by_speech_and_off_in_manual_mode():
    h = Harness()
    update = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}}}}
    h.run(client("session.update", session=update))
    h.timers.advance(4.0)
    h.run(speech_started())
    assert h.timers.armed == 0
    h.timers.advance(10.0)
    assert not [e for e in h.sent if e["type"] == "input_audio_buffer.timeout_triggered"]
    manual_turns(h)
    h.run(committed())
    h.run(transcribed("hello"))
    h.timers.advance(60.0)
    assert h.timers.armed == 0
    assert not [e for e in h.sent if e["type"] == "input_audio_buffer.timeout_triggered"]


def test_a_new_response_says_the_previous_reply_audio_was_cut():
    h = Harness()
    answer_still_playing(h)
    h.run(user_text("Another question."))
    events = h.run(client("response.create"))
    assert [e["type"] for e in events] == [*RESPONSE_START, "output_audio_buffer.cleared"]
    assert events[-1]["response_id"] != events[0]["response"]["id"]


def test_transcripts_go_to_their_own_items_in_commit_order():
    h = Harness()
    manual_turns(h)
    h.run(committed())
    h.run(committed())
    first, second = h.rt.items[0]["id"], h.rt.items[1]["id"]
    h.run(transcribed("first"))
    h.run(transcribed("second"))
    done = [e for e in h.sent if e["type"] == "conversation.item.input_audio_transcription.completed"]
    assert [(e["item_id"], e["transcript"]) for e in done] == [(first, "first"), (second, "second")]


def test_retrieve_does_not_leak_private_fields():
    h = Harness()
    answered(h)
    item = h.run(client("conversation.item.retrieve", item_id=h.rt.items[-1]["id"]))[-1]["item"]
    assert item["content"] == [{"type": "output_audio", "transcript": "Paris is the capital."}]
    assert all(not key.startswith("_") for key in item)


def test_truncate_keeps_the_words_heard():
    h = Harness()
    answered(h)  # 1500 ms of audio for "Paris is the capital."
    h.run(client("conversation.item.truncate", item_id=h.rt.items[-1]["id"], content_index=0, audio_end_ms=750))
    assert h.rt.items[-1]["content"][0]["transcript"] == "Paris is"



def test_no_response_while_the_caller_goes_on_speaking():
    """A pause splits one spoken sentence into two turns: answer once, after the last of them."""
    h = Harness()
    for step in [speech_started(0), speech_stopped(900), committed(900), speech_started(1500),
                 transcribed("And so my fellow Americans,")]:
        h.run(step)
    assert h.pipeline.requests == []  # the caller is speaking again
    for step in [speech_stopped(3000), committed(1500), speech_started(3600), speech_stopped(4000), committed(400),
                 transcribed("ask not what your country can do for you,")]:
        h.run(step)
    assert h.pipeline.requests == []  # a later turn is still being transcribed
    h.run(transcribed("ask what you can do for your country."))
    assert len(h.pipeline.requests) == 1
    prompt = " ".join(m.content for m in h.pipeline.requests[0][0])
    assert "fellow Americans" in prompt and "ask not" in prompt and "for your country" in prompt
