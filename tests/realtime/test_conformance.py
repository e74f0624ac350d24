"""The OpenAI Realtime protocol of RealtimeSession, table-driven.

Each row drives one session (no sockets, no models) with client events and pipeline events and
asserts the exact sequence of server event types it sends. ``PipelineControlDouble`` is a test
double of the PipelineControl Protocol: it records what the session asks of the pipeline and
answers ``interrupt()`` as a unit would for the state the row put it in.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import pytest

from gateway.config import GatewayConfig
from gateway.models.base import ChatMessage
from gateway.pipeline import events as pe
from gateway.pipeline.latency import STAGES, TurnLatency
from gateway.realtime.control import PipelineControl
from gateway.realtime.events import BETA_ONLY_CLIENT_EVENTS, CLIENT_EVENTS
from gateway.realtime.items import ClientError
from gateway.realtime.session import MAX_CLIENT_MESSAGE_BYTES, RealtimeSession
from tests.doubles import PipelineControlDouble
from tests.realtime.harness import (
    AUDIO_RESPONSE_END,
    ID_SHAPE,
    LOCAL,
    RESPONSE_START,
    SID,
    TEXT_RESPONSE_END,
    TRANSCRIBED,
    Harness,
    Step,
    answer_still_playing,
    answered,
    barge_in,
    client,
    committed,
    finished,
    fresh,
    manual_turns,
    playback_started,
    playback_stopped,
    rejected_empty_commit,
    responding,
    said,
    speaking,
    speech_started,
    speech_stopped,
    text_only,
    transcribed,
    user_text,
    with_user_item,
    wrote,
)


@dataclass
class Row:
    id: str
    given: Callable[[Harness], None]
    steps: list[Step]
    expected: list[str]
    error_code: Optional[str] = None  # for rows that end in an error: its code (and the echo is checked)


ROWS = [
    # session.update
    Row(
        "session.update",
        fresh,
        [client("session.update", "evt_c1", session={"type": "realtime", "instructions": "Be brief."})],
        ["session.updated"],
    ),
    Row(
        "session.update/invalid",
        fresh,
        [client("session.update", "evt_c2", session={"type": "realtime", "audio": {"output": {"speed": "fast"}}})],
        ["error"],
        "invalid_value",
    ),
    Row(
        "session.update/not-an-object",
        fresh,
        [client("session.update", "evt_c3", session="realtime")],
        ["error"],
        "invalid_value",
    ),
    # input_audio_buffer.*
    Row(
        "input_audio_buffer.append",
        fresh,
        [client("input_audio_buffer.append", "evt_c4", audio="AAAA")],
        ["error"],
        "unsupported_event",
    ),
    Row(
        "input_audio_buffer.commit",
        fresh,
        [client("input_audio_buffer.commit", "evt_c5"), committed(), transcribed()],
        ["input_audio_buffer.committed", "conversation.item.added", *TRANSCRIBED, *RESPONSE_START],
    ),
    Row(
        "input_audio_buffer.commit/empty",
        fresh,
        [client("input_audio_buffer.commit", "evt_c6"), rejected_empty_commit()],
        ["error"],
        "input_audio_buffer_commit_empty",
    ),
    Row(
        "input_audio_buffer.clear",
        fresh,
        [client("input_audio_buffer.clear", "evt_c7")],
        ["input_audio_buffer.cleared"],
    ),
    # output_audio_buffer.clear
    Row(
        "output_audio_buffer.clear/while-answering",
        speaking,
        [client("output_audio_buffer.clear", "evt_c8")],
        ["output_audio_buffer.cleared", *AUDIO_RESPONSE_END],
    ),
    Row(
        "output_audio_buffer.clear/answer-done-still-playing",
        answer_still_playing,
        [client("output_audio_buffer.clear", "evt_c9")],
        ["output_audio_buffer.cleared"],
    ),
    Row("output_audio_buffer.clear/nothing-playing", answered, [client("output_audio_buffer.clear", "evt_c10")], []),
    # conversation.item.*
    Row(
        "conversation.item.create",
        fresh,
        [user_text(event_id="evt_c11")],
        ["conversation.item.added", "conversation.item.done"],
    ),
    Row(
        "conversation.item.create/bad-content",
        fresh,
        [
            client(
                "conversation.item.create",
                "evt_c12",
                item={"type": "message", "role": "user", "content": [{"type": "input_text", "text": 7}]},
            )
        ],
        ["error"],
        "invalid_type",
    ),
    Row(
        "conversation.item.create/unknown-previous",
        fresh,
        [user_text(event_id="evt_c13", previous_item_id="item_nope")],
        ["error"],
        "item_not_found",
    ),
    Row(
        "conversation.item.retrieve",
        with_user_item,
        [lambda h: h.run(client("conversation.item.retrieve", item_id=h.rt.items[0]["id"]))],
        ["conversation.item.retrieved"],
    ),
    Row(
        "conversation.item.retrieve/unknown",
        fresh,
        [client("conversation.item.retrieve", "evt_c14", item_id="item_nope")],
        ["error"],
        "item_not_found",
    ),
    Row(
        "conversation.item.truncate",
        answered,
        [
            lambda h: h.run(
                client("conversation.item.truncate", item_id=h.rt.items[-1]["id"], content_index=0, audio_end_ms=500)
            )
        ],
        ["conversation.item.truncated"],
    ),
    Row(
        "conversation.item.truncate/past-the-audio",
        answered,
        [
            lambda h: h.run(
                client(
                    "conversation.item.truncate",
                    "evt_c15",
                    item_id=h.rt.items[-1]["id"],
                    content_index=0,
                    audio_end_ms=99_000,
                )
            )
        ],
        ["error"],
        "invalid_value",
    ),
    Row(
        "conversation.item.truncate/user-item",
        with_user_item,
        [
            lambda h: h.run(
                client(
                    "conversation.item.truncate",
                    "evt_c16",
                    item_id=h.rt.items[0]["id"],
                    content_index=0,
                    audio_end_ms=0,
                )
            )
        ],
        ["error"],
        "invalid_value",
    ),
    Row(
        "conversation.item.delete",
        with_user_item,
        [lambda h: h.run(client("conversation.item.delete", item_id=h.rt.items[0]["id"]))],
        ["conversation.item.deleted"],
    ),
    Row(
        "conversation.item.delete/missing-id",
        fresh,
        [client("conversation.item.delete", "evt_c17")],
        ["error"],
        "missing_required_parameter",
    ),
    Row(
        "conversation.item.retrieve/wrong-type",
        fresh,
        [client("conversation.item.retrieve", "evt_c25", item_id=42)],
        ["error"],
        "invalid_type",
    ),
    # response.*
    Row(
        "response.create/spoken",
        with_user_item,
        [
            client("response.create", "evt_c18"),
            said("Paris is the capital."),
            playback_started(),
            finished(),
            playback_stopped(),
        ],
        [
            *RESPONSE_START,
            "response.output_audio_transcript.delta",
            "output_audio_buffer.started",
            *AUDIO_RESPONSE_END,
            "output_audio_buffer.stopped",
        ],
    ),
    Row(
        "response.create/text-only",
        with_user_item,
        [
            client("response.create", response={"output_modalities": ["text"]}),
            wrote("Paris."),
            finished("Paris.", audio=False),
        ],
        [*RESPONSE_START, "response.output_text.delta", *TEXT_RESPONSE_END],
    ),
    Row(
        "response.create/out-of-band",
        with_user_item,
        [
            client(
                "response.create",
                response={"conversation": "none", "output_modalities": ["text"], "metadata": {"k": "v"}},
            ),
            finished("Summary.", audio=False),
        ],
        [
            "response.created",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.done",
            "rate_limits.updated",
        ],
    ),
    Row(
        "response.create/while-active",
        responding,
        [client("response.create", "evt_c19")],
        ["error"],
        "conversation_already_has_active_response",
    ),
    Row(
        "response.create/bad-modalities",
        with_user_item,
        [client("response.create", "evt_c20", response={"output_modalities": ["video"]})],
        ["error"],
        "invalid_value",
    ),
    Row(
        "response.cancel",
        speaking,
        [client("response.cancel", "evt_c21")],
        ["output_audio_buffer.cleared", *AUDIO_RESPONSE_END],
    ),
    Row("response.cancel/before-audio", responding, [client("response.cancel")], AUDIO_RESPONSE_END),
    Row(
        "response.cancel/done-but-still-playing",
        answer_still_playing,
        [client("response.cancel")],
        ["output_audio_buffer.cleared"],
    ),
    Row(
        "response.cancel/nothing-active",
        answered,
        [client("response.cancel", "evt_c22")],
        ["error"],
        "response_cancel_not_active",
    ),
    # malformed messages
    Row("bad-json", fresh, ['{"type": "response.create",'], ["error"], "invalid_json"),
    Row("not-an-object", fresh, ["[1, 2, 3]"], ["error"], "invalid_event"),
    Row("unknown-type", fresh, [client("response.explode", "evt_c23")], ["error"], "invalid_value"),
    Row("missing-type", fresh, [{"event_id": "evt_c24", "item": {}}], ["error"], "missing_required_parameter"),
    Row(
        "oversize",
        fresh,
        [json.dumps(client("session.update", session={"instructions": "x" * MAX_CLIENT_MESSAGE_BYTES}))],
        ["error"],
        "message_too_large",
    ),
    Row("binary-not-utf8", fresh, [b"\xff\xfe\x00"], ["error"], "invalid_json"),
    # server VAD turns and barge-in (pipeline events)
    Row(
        "server-vad-turn",
        fresh,
        [speech_started(), speech_stopped(), committed(), transcribed()],
        [
            "input_audio_buffer.speech_started",
            "input_audio_buffer.speech_stopped",
            "input_audio_buffer.committed",
            "conversation.item.added",
            *TRANSCRIBED,
            *RESPONSE_START,
        ],
    ),
    Row(
        "barge-in",
        speaking,
        [speech_started(), barge_in()],
        ["input_audio_buffer.speech_started", "output_audio_buffer.cleared", *AUDIO_RESPONSE_END],
    ),
    Row(
        "manual-turn/no-auto-response",
        manual_turns,
        [client("input_audio_buffer.commit"), committed(), transcribed()],
        ["input_audio_buffer.committed", "conversation.item.added", *TRANSCRIBED],
    ),
    Row(
        "transcription-failed",
        fresh,
        [committed(), lambda h: pe.TranscriptionFailed(SID, message="decoder error")],
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.input_audio_transcription.failed",
        ],
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_client_event_gives_expected_server_events(row: Row) -> None:
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
def test_ids_follow_openai_shapes_and_reference_each_other() -> None:
    h = Harness()
    assert h.sent[0]["type"] == "session.created" and ID_SHAPE.match(h.sent[0]["session"]["id"])
    assert h.sent[0]["session"]["id"].startswith("sess_")
    for step in [
        speech_started(),
        speech_stopped(),
        committed(),
        transcribed(),
        said("Paris."),
        playback_started(),
        finished("Paris."),
        playback_stopped(),
    ]:
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
    assert (
        assistant["id"].startswith("item_")
        and assistant["role"] == "assistant"
        and assistant["status"] == "in_progress"
    )
    assert h.last("conversation.item.added")["previous_item_id"] == user_item
    for name in ("response.output_audio_transcript.delta", "response.output_audio.done", "response.content_part.done"):
        event = h.last(name)
        assert (event["response_id"], event["item_id"], event["output_index"], event["content_index"]) == (
            created["id"],
            assistant["id"],
            0,
            0,
        )
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


def test_cancelled_and_incomplete_responses_say_why() -> None:
    h = Harness()
    speaking(h)
    h.run(client("response.cancel"))
    done = h.last("response.done")["response"]
    assert done["status"] == "cancelled" and done["status_details"] == {
        "type": "cancelled",
        "reason": "client_cancelled",
    }
    # Only what the caller heard stays in the conversation.
    assert done["output"][0]["content"][0]["transcript"] == "Paris"
    assert h.rt.items[-1]["content"][0]["transcript"] == "Paris"
    h.run(client("response.create"))
    h.run(said("A long"))
    h.run(finished("A long", status="incomplete"))
    done = h.last("response.done")["response"]
    assert done["status"] == "incomplete" and done["status_details"]["reason"] == "max_output_tokens"


def test_barge_in_reason_is_turn_detected() -> None:
    h = Harness()
    speaking(h)
    h.run(speech_started())
    h.run(barge_in())
    assert h.last("response.done")["response"]["status_details"] == {"type": "cancelled", "reason": "turn_detected"}


def test_failed_stage_fails_the_response() -> None:
    h = Harness()
    responding(h)
    events = h.run(
        lambda h: pe.StageFailed(SID, stage="llm", message="out of memory", generation=h.pipeline.generation)
    )
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
            "turn_detection": {
                "type": "server_vad",
                "threshold": 0.6,
                "prefix_padding_ms": 200,
                "silence_duration_ms": 700,
                "create_response": True,
                "interrupt_response": False,
                "idle_timeout_ms": 8000,
            },
        },
        "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin", "speed": 1.2},
    },
}


def test_stock_openai_names_map_to_what_is_really_used() -> None:
    h = Harness()
    session = h.run(client("session.update", session=GA_STOCK_SESSION))[-1]["session"]
    assert session["model"] == "smollm2-135m"
    assert session["audio"]["input"]["transcription"]["model"] == "whisper-base"
    assert session["audio"]["output"]["voice"] == "joe"
    assert session["audio"]["output"]["speed"] == 1.2 and session["instructions"] == "You are terse."
    assert session["audio"]["input"]["turn_detection"] == {
        "type": "server_vad",
        "threshold": 0.6,
        "prefix_padding_ms": 200,
        "silence_duration_ms": 700,
        "idle_timeout_ms": 8000,
        "create_response": True,
        "interrupt_response": False,
    }
    turn = h.pipeline.settings.turn
    assert (turn.threshold, turn.prefix_padding_ms, turn.silence_duration_ms, turn.interrupt_response) == (
        0.6,
        200,
        700,
        False,
    )
    assert h.pipeline.settings.instructions == "You are terse." and h.pipeline.settings.speed == 1.2
    # The GA session shape of OpenAI's examples.
    assert {
        "type",
        "object",
        "id",
        "model",
        "output_modalities",
        "instructions",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "audio",
    } <= set(session)


def test_invalid_update_names_the_field_and_keeps_previous_settings() -> None:
    h = Harness()
    h.run(client("session.update", session=GA_STOCK_SESSION))
    before = h.rt.describe()
    bad = {
        "type": "realtime",
        "instructions": "Changed!",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": "long"}}},
    }
    error = h.run(client("session.update", "evt_bad", session=bad))[-1]
    assert error["type"] == "error" and error["error"]["event_id"] == "evt_bad"
    assert error["error"]["param"] == "session.audio.input.turn_detection.silence_duration_ms"
    assert "silence_duration_ms" in error["error"]["message"]
    assert h.rt.describe() == before
    assert h.pipeline.settings.instructions == "You are terse."
    assert h.pipeline.settings.turn.silence_duration_ms == 700


@pytest.mark.parametrize(
    "session,param",
    [
        ({"type": "realtime", "output_modalities": ["video"]}, "session.output_modalities[0]"),
        ({"type": "realtime", "audio": {"output": {"speed": 3.0}}}, "session.audio.output.speed"),
        (
            {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": "high"}}}},
            "session.audio.input.turn_detection.threshold",
        ),
        (
            {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "magic_vad"}}}},
            "session.audio.input.turn_detection",
        ),
        (
            {"type": "realtime", "audio": {"input": {"format": {"type": "audio/mp3"}}}},
            "session.audio.input.format.type",
        ),
        ({"type": "realtime", "max_output_tokens": 0}, "session.max_output_tokens"),
        ({"type": "realtime", "instructions": 42}, "session.instructions"),
        (
            {"modalities": ["text"], "turn_detection": {"type": "server_vad", "create_response": "yes"}},
            "session.turn_detection.create_response",
        ),
    ],
)
def test_structurally_invalid_values_name_the_field(session: dict, param: str) -> None:
    h = Harness()
    error = h.run(client("session.update", session=session))[-1]
    assert error["type"] == "error" and error["error"]["param"] == param, error


def test_turn_detection_replaces_the_old_one_and_semantic_vad_maps_to_server_vad() -> None:
    h = Harness()
    h.run(client("session.update", session=GA_STOCK_SESSION))
    semantic = {
        "type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "high"}}},
    }
    session = h.run(client("session.update", session=semantic))[-1]["session"]
    assert session["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad",
        "eagerness": "high",
        "create_response": True,
        "interrupt_response": True,
    }
    turn = h.pipeline.settings.turn
    assert turn.mode == "server_vad" and turn.silence_duration_ms == 300 and turn.idle_timeout_ms is None
    plain = {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", "threshold": 0.7}}}}
    session = h.run(client("session.update", session=plain))[-1]["session"]
    # Fields the new object leaves out are back to the gateway's defaults.
    assert session["audio"]["input"]["turn_detection"]["silence_duration_ms"] == GatewayConfig().silence_duration_ms
    assert session["audio"]["input"]["turn_detection"]["threshold"] == 0.7


def test_max_output_tokens_inf_means_the_configured_cap() -> None:
    h = Harness()
    cap = GatewayConfig().max_response_tokens
    assert (
        h.run(client("session.update", session={"type": "realtime", "max_output_tokens": "inf"}))[-1]["session"][
            "max_output_tokens"
        ]
        == cap
    )
    assert (
        h.run(client("session.update", session={"type": "realtime", "max_output_tokens": 20}))[-1]["session"][
            "max_output_tokens"
        ]
        == 20
    )
    h.run(user_text())
    h.run(client("response.create", response={"max_output_tokens": 5}))
    assert h.pipeline.requests[-1][2] == 5, "a response's own cap reaches the pipeline"
    assert h.pipeline.settings.max_tokens == 20, "and does not change the session's"


def test_beta_session_gets_beta_names_and_shapes() -> None:
    h = Harness()
    beta = {
        "modalities": ["text", "audio"],
        "voice": "alloy",
        "input_audio_format": "g711_ulaw",
        "input_audio_transcription": {"model": "whisper-1"},
        "turn_detection": {"type": "server_vad"},
    }
    session = h.run(client("session.update", session=beta))[-1]["session"]
    assert session["voice"] == "joe" and session["modalities"] == ["text", "audio"]
    assert session["input_audio_format"] == "g711_ulaw" and session["output_audio_format"] == "pcm16"
    assert session["input_audio_transcription"]["model"] == "whisper-base" and "audio" not in session
    # A later update with only shared keys keeps the beta dialect.
    assert "modalities" in h.run(client("session.update", session={"instructions": "Hi."}))[-1]["session"]
    h.run(user_text())
    assert h.sent[-1]["type"] == "conversation.item.created", "beta alias of conversation.item.added; no item.done"
    types = [
        e["type"]
        for e in h.run(client("response.create"))
        + h.run(said("Hello."))
        + h.run(playback_started())
        + h.run(finished("Hello."))
    ]
    assert types == [
        "response.created",
        "response.output_item.added",
        "conversation.item.created",
        "response.content_part.added",
        "response.audio_transcript.delta",
        "output_audio_buffer.started",
        "response.audio.done",
        "response.audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.done",
        "rate_limits.updated",
    ]
    done = h.last("response.done")["response"]
    assert done["modalities"] == ["text", "audio"] and done["output"][0]["content"][0]["type"] == "audio"
    h.run(client("response.create", response={"modalities": ["text"]}))
    h.run(wrote("Hi."))
    assert h.sent[-1]["type"] == "response.text.delta"


# ---------------------------------------------------------------- turn handling
def test_manual_turns_wait_for_commit_and_response_create() -> None:
    h = Harness()
    manual_turns(h)
    assert h.last("session.updated")["session"]["audio"]["input"]["turn_detection"] is None
    assert h.pipeline.settings.turn.mode == "manual"
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


def test_text_conversation_prompt_and_text_only_session() -> None:
    h = Harness()
    text_only(h)
    h.run(user_text("Say hi."))
    h.run(client("response.create"))
    messages, audio, _ = h.pipeline.requests[-1]
    assert audio is False
    assert messages[0].role == "system" and messages[-1] == ChatMessage("user", "Say hi.")
    assert h.last("response.content_part.added")["part"] == {"type": "text", "text": ""}


def test_response_input_item_reference_and_instructions() -> None:
    h = Harness()
    h.run(user_text("The sky is blue."))
    first = h.rt.items[0]["id"]
    h.run(
        client(
            "response.create",
            response={
                "conversation": "none",
                "instructions": "Summarise.",
                "output_modalities": ["text"],
                "input": [
                    {"type": "item_reference", "id": first},
                    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "One word."}]},
                ],
            },
        )
    )
    messages = h.pipeline.requests[-1][0]
    assert messages == [
        ChatMessage("system", "Summarise."),
        ChatMessage("user", "The sky is blue."),
        ChatMessage("user", "One word."),
    ]
    cancelled = h.run(client("response.cancel"))
    assert "response.done" in [e["type"] for e in cancelled]
    bad = h.run(
        client("response.create", "evt_ref", response={"input": [{"type": "item_reference", "id": "item_missing"}]})
    )
    assert bad[-1]["error"]["code"] == "item_not_found" and bad[-1]["error"]["event_id"] == "evt_ref"


def test_idle_timeout_triggers_a_response_after_playback_ends() -> None:
    h = Harness()
    update = {
        "type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 6000}}},
    }
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
        "input_audio_buffer.timeout_triggered",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.done",
        *RESPONSE_START,
    ]
    triggered = events[0]
    assert triggered["item_id"] == events[1]["item_id"] and triggered["item_id"].startswith("item_")
    assert abs((triggered["audio_end_ms"] - triggered["audio_start_ms"]) - 6000) <= 50
    assert "silent" in h.pipeline.requests[-1][0][-1].content or "nothing" in h.pipeline.requests[-1][0][-1].content


def test_idle_timeout_waits_for_a_reply_queued_but_not_yet_playing() -> None:
    """Failed before: a reply done generating whose first frame was not out yet (its audio queued:
    a short reply the TTS finished before the track's next read, or one waiting out a SIP hold)
    let the idle timer arm at ``response.done``; 5 s later ``timeout_triggered`` answered the
    silence and cut the reply the caller had not yet heard."""
    h = Harness()
    update = {
        "type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}}},
    }
    h.run(client("session.update", session=update))
    answer_queued_unplayed(h)
    assert h.timers.armed == 0, "armed while the reply is queued"
    h.timers.advance(8.0)
    assert not [
        e for e in h.sent if e["type"] in ("input_audio_buffer.timeout_triggered", "output_audio_buffer.cleared")
    ]
    h.run(playback_started())
    h.timers.advance(2.0)
    h.run(playback_stopped(2000))
    assert h.timers.armed == 2, "the caller's turn once the reply was heard"
    h.timers.advance(5.1)
    assert [e for e in h.sent if e["type"] == "input_audio_buffer.timeout_triggered"]


def test_idle_timeout_is_reset_by_speech_and_off_in_manual_mode() -> None:
    h = Harness()
    update = {
        "type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "server_vad", "idle_timeout_ms": 5000}}},
    }
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


def test_a_new_response_says_the_previous_reply_audio_was_cut() -> None:
    h = Harness()
    answer_still_playing(h)
    h.run(user_text("Another question."))
    events = h.run(client("response.create"))
    assert [e["type"] for e in events] == [*RESPONSE_START, "output_audio_buffer.cleared"]
    assert events[-1]["response_id"] != events[0]["response"]["id"]


def answer_queued_unplayed(h: Harness) -> None:
    """A response done generating, its audio queued, its first frame not yet out (no
    ``output_audio_buffer.started``): a short reply the TTS finished before the track's next read."""
    responding(h)
    h.run(said("Paris."))
    h.pipeline.play(0, "")  # queued, nothing heard yet
    h.run(finished("Paris."))


def test_a_new_response_cuts_a_reply_done_but_not_yet_playing() -> None:
    """Failed before: only a reply already playing was cut when a new one started; a reply done
    but still queued was forgotten (its audio dropped as stale, no ``output_audio_buffer.cleared``,
    its item keeping words the caller never heard)."""
    h = Harness()
    answer_queued_unplayed(h)
    first = h.last("response.done")["response"]["id"]
    h.run(user_text("Another question."))
    events = h.run(client("response.create"))
    assert [e["type"] for e in events] == [*RESPONSE_START, "output_audio_buffer.cleared"]
    assert events[-1]["response_id"] == first
    item = next(i for i in h.rt.items if i["role"] == "assistant")
    assert item["content"][0]["transcript"] == "", "the caller heard none of it"
    assert h.pipeline.calls.count("interrupt") == 1


def test_response_cancel_stops_a_reply_done_but_not_yet_playing() -> None:
    """Failed before: ``response.cancel`` of a reply whose audio was queued but not yet started
    answered ``response_cancel_not_active`` and let it play."""
    h = Harness()
    answer_queued_unplayed(h)
    first = h.last("response.done")["response"]["id"]
    events = h.run(client("response.cancel", response_id=first))
    assert [e["type"] for e in events] == ["output_audio_buffer.cleared"]
    assert h.pipeline.audio is None


def test_a_reply_with_no_audio_is_not_cut_again() -> None:
    """A text reply (no audio queued) and a played-out one cost no interrupt when the next starts."""
    h = Harness()
    answered(h)
    h.run(user_text("Another question."))
    h.run(client("response.create"))
    assert "interrupt" not in h.pipeline.calls


def test_transcripts_go_to_their_own_items_in_commit_order() -> None:
    h = Harness()
    manual_turns(h)
    h.run(committed())
    h.run(committed())
    first, second = h.rt.items[0]["id"], h.rt.items[1]["id"]
    h.run(transcribed("first"))
    h.run(transcribed("second"))
    done = [e for e in h.sent if e["type"] == "conversation.item.input_audio_transcription.completed"]
    assert [(e["item_id"], e["transcript"]) for e in done] == [(first, "first"), (second, "second")]


def test_retrieve_does_not_leak_private_fields() -> None:
    h = Harness()
    answered(h)
    item = h.run(client("conversation.item.retrieve", item_id=h.rt.items[-1]["id"]))[-1]["item"]
    assert item["content"] == [{"type": "output_audio", "transcript": "Paris is the capital."}]
    assert all(not key.startswith("_") for key in item)


def test_truncate_keeps_the_words_heard() -> None:
    h = Harness()
    answered(h)  # 1500 ms of audio for "Paris is the capital."
    h.run(client("conversation.item.truncate", item_id=h.rt.items[-1]["id"], content_index=0, audio_end_ms=750))
    assert h.rt.items[-1]["content"][0]["transcript"] == "Paris is"


def test_no_response_while_the_caller_goes_on_speaking() -> None:
    """A pause splits one spoken sentence into two turns: answer once, after the last of them."""
    h = Harness()
    for step in [
        speech_started(0),
        speech_stopped(900),
        committed(900),
        speech_started(1500),
        transcribed("And so my fellow Americans,"),
    ]:
        h.run(step)
    assert h.pipeline.requests == []  # the caller is speaking again
    for step in [
        speech_stopped(3000),
        committed(1500),
        speech_started(3600),
        speech_stopped(4000),
        committed(400),
        transcribed("ask not what your country can do for you,"),
    ]:
        h.run(step)
    assert h.pipeline.requests == []  # a later turn is still being transcribed
    h.run(transcribed("ask what you can do for your country."))
    assert len(h.pipeline.requests) == 1
    prompt = " ".join(m.content for m in h.pipeline.requests[0][0])
    assert "fellow Americans" in prompt and "ask not" in prompt and "for your country" in prompt


def test_a_last_turn_with_no_words_answers_the_words_held_back_for_it() -> None:
    """Failed before (the load generator's JFK turns, docs/BENCHMARKS.md "Does a reply ever answer
    another caller?"): the sentence's last part was held back while a click after it was being
    transcribed; the click's empty transcript started nothing, so the caller was never answered."""
    h = Harness()
    for step in [
        speech_started(0),
        speech_stopped(2000),
        committed(2000),
        speech_started(2300),  # a click 0.3 s after the sentence
        transcribed("Ask what you can do for your country."),
        speech_stopped(2500),
        committed(200),
    ]:
        h.run(step)
    assert h.pipeline.requests == []  # a later turn is still being transcribed
    h.run(transcribed(""))
    assert len(h.pipeline.requests) == 1, "the held-back words are answered"
    prompt = " ".join(m.content for m in h.pipeline.requests[0][0])
    assert "for your country" in prompt

    noise_only = Harness()
    for step in [speech_started(0), speech_stopped(300), committed(300), transcribed("")]:
        noise_only.run(step)
    assert noise_only.pipeline.requests == [], "a turn of noise alone starts no reply"


@pytest.mark.parametrize("no_words", [".", " . ", "...", "?", "♪"])
def test_a_last_turn_of_punctuation_answers_the_words_held_back_for_it(no_words: str) -> None:
    """Failed before (the load generator's JFK asked third, "the answer was never played"; issue
    h38): the breath at the recording's end, 0.3 s after "...for your country.", was a turn of its
    own (0.42 s), and Whisper wrote it as "." — words, by ``strip()``. The reply then answered "."
    (the prompt's last user message), the LLM ended it at once (1 output token, no text), and the
    response completed with no audio: the caller was never answered. A transcript with no word in
    it is a turn with no words: the held-back words are answered, and "." is not in the prompt."""
    h = Harness()
    for step in [
        speech_started(0),
        speech_stopped(2000),
        committed(2000),
        speech_started(2300),  # the breath
        transcribed("Ask what you can do for your country."),
        speech_stopped(2400),
        committed(420),
    ]:
        h.run(step)
    assert h.pipeline.requests == []  # a later turn is still being transcribed
    h.run(transcribed(no_words))
    assert len(h.pipeline.requests) == 1, "the held-back words are answered"
    prompt = h.pipeline.requests[0][0]
    assert prompt[-1].role == "user" and prompt[-1].content == "Ask what you can do for your country."
    assert all(m.content.strip() != no_words.strip() for m in prompt)

    noise_only = Harness()
    answered(noise_only)
    for step in [speech_started(0), speech_stopped(300), committed(300), transcribed(no_words)]:
        noise_only.run(step)
    assert len(noise_only.pipeline.requests) == 1, "after an answer, a turn of punctuation alone starts no reply"


def test_a_reply_cancelled_before_it_said_a_word_leaves_the_words_unanswered() -> None:
    """Failed before (the load generator's JFK asked third, "the last turn got no completed
    response", issue h38): the reply to "...for your country." had started when the breath after
    it began, the breath's speech cancelled it before it said a word (``turn_detected``), and the
    breath's turn came back with no words. The cancelled reply's empty assistant item counted as
    the answer, so nothing was said: the caller waited until hanging up."""
    h = Harness()
    for step in [
        speech_started(0),
        speech_stopped(2000),
        committed(2000),
        transcribed("Ask what you can do for your country."),
    ]:
        h.run(step)
    assert len(h.pipeline.requests) == 1
    for step in [speech_started(2300), barge_in(), speech_stopped(2400), committed(420)]:
        h.run(step)
    assert h.last("response.done")["response"]["status"] == "cancelled"
    h.run(transcribed(""))
    assert len(h.pipeline.requests) == 2, "the words are answered after all"
    prompt = h.pipeline.requests[1][0]
    assert prompt[-1].role == "user" and prompt[-1].content == "Ask what you can do for your country."

    heard = Harness()
    for step in [
        speech_started(0),
        speech_stopped(2000),
        committed(2000),
        transcribed("Ask what you can do for your country."),
        said("Ask what"),
        playback_started(),
        speech_started(2300),
        barge_in(),
        speech_stopped(2400),
        committed(420),
        transcribed(""),
    ]:
        heard.run(step)
    assert len(heard.pipeline.requests) == 1, "a reply cut after some words were heard is an answer"


def test_a_turn_of_words_cuts_a_reply_asked_before_it_and_is_answered() -> None:
    """Failed before (the load generator's "1 2 3" caller, docs/BENCHMARKS.md: "One. Two." answered,
    the "three" heard after it never): the reply to the first part was asked just after the unit's
    interrupt at the next speech's start had run (its transcript and that start crossed on the event
    loop), so nothing cut it; the next turn's transcript found it active and started no response.
    Now that turn cuts it (``turn_detected``, as its start should have) and is answered."""
    h = Harness()
    for step in [speech_started(0), speech_stopped(900), committed(900), transcribed("One. Two.")]:
        h.run(step)
    assert len(h.pipeline.requests) == 1
    first = h.last("response.created")["response"]["id"]
    for step in [speech_started(1300), speech_stopped(1800), committed(500)]:  # no barge-in came
        h.run(step)
    h.run(transcribed("Three."))
    done = h.last("response.done")["response"]
    assert done["id"] == first and done["status"] == "cancelled"
    assert done["status_details"]["reason"] == "turn_detected"
    assert len(h.pipeline.requests) == 2, "the last turn is answered"
    prompt = " ".join(m.content for m in h.pipeline.requests[1][0])
    assert "One. Two." in prompt and prompt.endswith("Three.")

    # The unit tells which replies its interrupt saw (``SpeechStarted.replies_seen``): one asked after
    # it is cut at the start itself, before the turn is transcribed (its audio never over the caller).
    told = Harness()
    for step in [speech_started(0), speech_stopped(900), committed(900), transcribed("One. Two.")]:
        told.run(step)
    told.run(lambda h: pe.SpeechStarted(SID, audio_start_ms=1300, replies_seen=h.pipeline.generation - 1))
    assert told.last("response.done")["response"]["status_details"]["reason"] == "turn_detected"
    for step in [speech_stopped(1800), committed(500), transcribed("Three.")]:
        told.run(step)
    assert len(told.pipeline.requests) == 2 and told.pipeline.requests[1][0][-1].content.endswith("Three.")
    seen = Harness()  # a start whose interrupt saw the reply: the unit cut it (or it had ended), not the session
    for step in [speech_started(0), speech_stopped(900), committed(900), transcribed("One. Two.")]:
        seen.run(step)
    seen.run(lambda h: pe.SpeechStarted(SID, audio_start_ms=1300, replies_seen=h.pipeline.generation))
    assert seen.rt.responses.active() is not None

    # A turn with no words (a breath, a click) leaves the reply alone: it cuts nothing, asks nothing.
    breath = Harness()
    for step in [speech_started(0), speech_stopped(900), committed(900), transcribed("One. Two.")]:
        breath.run(step)
    for step in [speech_started(1300), speech_stopped(1500), committed(200), transcribed("")]:
        breath.run(step)
    assert len(breath.pipeline.requests) == 1 and breath.rt.responses.active() is not None

    # Without interrupt_response, a turn's start never cuts a reply (OpenAI: it "may fail to create
    # a response if the model is already responding"): the reply goes on, the turn is not answered.
    polite = Harness()
    turn = {"type": "server_vad", "interrupt_response": False}
    polite.run(client("session.update", session={"type": "realtime", "audio": {"input": {"turn_detection": turn}}}))
    for step in [speech_started(0), speech_stopped(900), committed(900), transcribed("One. Two.")]:
        polite.run(step)
    for step in [speech_started(1300), speech_stopped(1800), committed(500), transcribed("Three.")]:
        polite.run(step)
    assert len(polite.pipeline.requests) == 1 and polite.rt.responses.active() is not None


# ---------------------------------------------------------------- dispatch tables and the seam
def _concrete_pipeline_events() -> list[type]:
    return [
        cls
        for _, cls in inspect.getmembers(pe, inspect.isclass)
        if issubclass(cls, pe.PipelineEvent) and cls is not pe.PipelineEvent and cls.__module__ == pe.__name__
    ]


def _sdk_client_event_types(beta: bool = False) -> set[str]:
    """The ``type`` of every member of the OpenAI SDK's client-event union (``openai.types.realtime``;
    ``beta``: ``openai.types.beta.realtime``)."""
    import typing

    if beta:
        from openai.types.beta.realtime.realtime_client_event import RealtimeClientEvent
    else:
        from openai.types.realtime.realtime_client_event import RealtimeClientEvent

    union = typing.get_args(RealtimeClientEvent)[0]  # Annotated[Union[...], discriminator]
    types = set()
    for member in typing.get_args(union):
        (literal,) = typing.get_args(member.model_fields["type"].annotation)
        types.add(literal)
    return types


def test_every_client_event_and_pipeline_event_has_a_handler() -> None:
    """The dispatch tables are explicit: an event left out of them (or renamed) must fail here.
    The client events are those of the OpenAI SDK's client-event union, not the gateway's own list."""
    session = Harness().rt
    sdk = _sdk_client_event_types() | set(BETA_ONLY_CLIENT_EVENTS)
    assert len(sdk) >= 12, sdk
    assert set(session._client_handlers) == sdk == set(CLIENT_EVENTS), (
        sorted(sdk - set(session._client_handlers)),
        sorted(set(session._client_handlers) - sdk),
    )
    assert set(BETA_ONLY_CLIENT_EVENTS) <= _sdk_client_event_types(beta=True), "the beta SDK sends them"
    events = _concrete_pipeline_events()
    assert len(events) >= 14
    missing = [cls.__name__ for cls in events if cls not in session._pipeline_handlers]
    assert not missing, f"pipeline events without a handler: {missing}"


def test_the_double_and_the_unit_offer_the_pipeline_control_protocol() -> None:
    from gateway.pool.lease import UnitLease
    from gateway.pool.unit import PipelineUnit

    members = [name for name in vars(PipelineControl) if not name.startswith("_")]
    assert {
        "current_settings",
        "apply_settings",
        "keep_alive",
        "commit_input",
        "clear_input",
        "create_response",
        "interrupt",
    } <= set(members)
    for implementation in (PipelineControlDouble, PipelineUnit, UnitLease):
        for name in members:
            expected = inspect.signature(getattr(PipelineControl, name))
            actual = inspect.signature(getattr(implementation, name))
            assert list(actual.parameters) == list(expected.parameters), (implementation.__name__, name)
            kinds = [p.kind for p in actual.parameters.values()]
            assert kinds == [p.kind for p in expected.parameters.values()], (implementation.__name__, name)


def test_apply_session_update_is_a_session_update() -> None:
    h = Harness()
    h.rt.apply_session_update(GA_STOCK_SESSION)
    assert [e["type"] for e in h.sent[1:]] == ["session.updated"]
    assert h.pipeline.settings.instructions == "You are terse."
    assert h.pipeline.settings.turn.idle_timeout_ms == 8000 and h.timers.armed == 2
    with pytest.raises(ClientError) as raised:
        h.rt.apply_session_update({"type": "realtime", "audio": {"output": {"speed": "fast"}}})
    assert raised.value.code == "invalid_value" and raised.value.param == "session.audio.output.speed"
    assert h.pipeline.settings.speed == 1.2, "a rejected update changes nothing"
    h.rt.apply_session_update({"modalities": ["text"]})  # beta (flat) shape: the session speaks beta
    assert h.rt.beta and h.sent[-1]["session"]["modalities"] == ["text"]


def test_max_call_s_sets_expires_at() -> None:
    h = Harness()
    assert h.sent[0]["session"]["expires_at"] is None
    sent: list[dict] = []
    rt = RealtimeSession(PipelineControlDouble(), sent.append, local_models=LOCAL, max_call_s=60)
    assert abs(rt.describe()["expires_at"] - (time.time() + 60)) <= 2


def test_gateway_latency_goes_only_to_a_client_that_asks_for_it() -> None:
    """A stock client (no ``gateway_events``) sees only OpenAI's server events."""
    h = Harness()
    speaking(h)
    measured = pe.TurnLatencyMeasured(SID, generation=h.pipeline.generation, latency_ms=TurnLatency().as_ms())
    assert not [e for e in h.run(lambda h: measured) if e["type"].startswith("gateway.")]


def test_gateway_latency_names_its_stages() -> None:
    h = Harness(extensions=frozenset({"gateway.latency"}))
    speaking(h)
    latency = TurnLatency(
        speech_end=1.0,
        end_of_turn=1.5,
        stt_done=1.7,
        llm_first_token=1.9,
        first_sentence=2.0,
        tts_first_chunk=2.2,
        first_audio_frame=2.25,
    )
    measured = pe.TurnLatencyMeasured(SID, generation=h.pipeline.generation, latency_ms=latency.as_ms())
    event = h.run(lambda h: measured)[-1]
    assert event["type"] == "gateway.latency" and event["response_id"] == h.last("response.created")["response"]["id"]
    assert [stage["name"] for stage in event["stages"]] == list(event["latency_ms"]) == [key for key, _ in STAGES]
    assert event["stages"][0] == {"name": "vad_end_of_turn", "label": "End of turn (VAD)"}
    assert event["stages"][-1] == {"name": "voice_to_voice", "label": "Voice-to-voice"}
    assert event["latency_ms"]["vad_end_of_turn"] == 500.0 and event["latency_ms"]["voice_to_voice"] == 1250.0
