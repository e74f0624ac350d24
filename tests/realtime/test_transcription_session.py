"""A transcription session (OpenAI: ``session.update`` with ``session.type`` ``"transcription"``,
or ``?intent=transcription`` on the WebSocket URL): the caller's turns are transcribed and never
answered. OpenAI's guide "Realtime transcription" (developers.openai.com/api/docs/guides/
realtime-transcription): "With the transcription-only mode, the model will not generate responses";
the session object has ``type: "transcription"`` and only ``audio.input``.

On main the ``type`` was refused (``invalid_value``, only ``"realtime"`` was known) and the intent
ignored, so a transcription client got a voice answer to every turn. The harness rows run without
models; the WebSocket one with the real STT.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import QUESTION, says, serve, server_errors
from tests.realtime.harness import Harness, client, committed, transcribed
from tests.transports.websocket.ws_client import EventClient

TRANSCRIPTION = {"type": "transcription", "audio": {"input": {"transcription": {"model": "gpt-4o-transcribe"}}}}


def _transcribing() -> tuple[Harness, list[dict]]:
    h = Harness()
    return h, h.run(client("session.update", session=TRANSCRIPTION))


def test_a_session_update_to_transcription_shows_a_transcription_session() -> None:
    h, sent = _transcribing()
    assert [e["type"] for e in sent] == ["session.updated"], sent
    session = sent[0]["session"]
    assert (session["type"], session["object"]) == ("transcription", "realtime.session")
    assert set(session["audio"]) == {"input"} and "output_modalities" not in session
    assert h.pipeline.settings.turn.create_response is False
    assert h.pipeline.settings.turn.interrupt_response is False
    assert h.pipeline.settings.preemptive_reply is False


def test_a_transcribed_turn_is_not_answered() -> None:
    h, _ = _transcribing()
    sent = h.run(committed()) + h.run(transcribed())
    types = [e["type"] for e in sent]
    assert "conversation.item.input_audio_transcription.completed" in types
    assert not [t for t in types if t.startswith("response.")], types
    assert "create_response" not in h.pipeline.calls


def test_turn_detection_set_later_still_makes_no_responses() -> None:
    h, _ = _transcribing()
    h.run(client("session.update", session={"audio": {"input": {"turn_detection": {"type": "server_vad"}}}}))
    assert h.pipeline.settings.turn.create_response is False
    assert h.last("session.updated")["session"]["type"] == "transcription"


def test_response_create_and_going_back_to_realtime_are_refused() -> None:
    h, _ = _transcribing()
    refused = h.run(client("response.create"))
    assert [e["error"]["code"] for e in refused] == ["unsupported_event"]
    back = h.run(client("session.update", session={"type": "realtime"}))
    assert [(e["error"]["code"], e["error"]["param"]) for e in back] == [("invalid_value", "session.type")]
    assert "create_response" not in h.pipeline.calls


@pytest.mark.slow  # real STT turns
async def test_a_websocket_opened_with_intent_transcription_transcribes_and_never_answers(
    models, speech, gateway_config
):
    async with serve(gateway_config(), models) as (url, _app):
        async with EventClient(url, query="?intent=transcription") as c:
            created = await c.wait_for("session.created", timeout=10)
            assert created["session"]["type"] == "transcription", created
            await c.stream(speech(QUESTION), silence_s=1.5, pace=2.0)
            heard = await c.wait_for("conversation.item.input_audio_transcription.completed", timeout=60)
            assert says(heard["transcript"], QUESTION), heard
            await asyncio.sleep(1.5)  # an answer would have begun by now
            assert not [e for e in c.events if e["type"].startswith("response.")], [e["type"] for e in c.events]
            assert c.error_codes() == [] and not server_errors(c.events)


def test_transcription_session_update_makes_a_transcription_session_and_answers_in_its_shape() -> None:
    """``transcription_session.update`` (OpenAI's beta transcription session: its API spec's
    ``RealtimeClientEventTranscriptionSessionUpdate``, the openai SDK's
    ``connection.transcription_session.update``) was refused as an unknown event
    (``invalid_value``): the language, format and turn detection such a client sends never
    applied. Now: applied as a transcription session, answered ``transcription_session.updated``
    (``realtime.transcription_session``, flat), the session's own (GA) event names kept."""
    h = Harness()
    session = {
        "input_audio_format": "g711_ulaw",
        "input_audio_transcription": {"model": "gpt-4o-transcribe", "prompt": "", "language": "de"},
        "turn_detection": {
            "type": "server_vad",
            "threshold": 0.6,
            "prefix_padding_ms": 300,
            "silence_duration_ms": 700,
        },
        "include": ["item.input_audio_transcription.logprobs"],
    }
    sent = h.run(client("transcription_session.update", session=session))
    assert [e["type"] for e in sent] == ["transcription_session.updated"], sent
    shown = sent[0]["session"]
    assert (shown["object"], shown["input_audio_format"]) == ("realtime.transcription_session", "g711_ulaw")
    assert shown["input_audio_transcription"]["language"] == "de"
    assert (shown["turn_detection"]["threshold"], shown["turn_detection"]["silence_duration_ms"]) == (0.6, 700)
    settings = h.pipeline.settings
    assert settings.language == "de" and settings.turn.silence_duration_ms == 700
    assert settings.turn.create_response is False and not h.rt.beta
    assert [e["error"]["code"] for e in h.run(client("response.create"))] == ["unsupported_event"]
    bad = h.run(client("transcription_session.update", session={"input_audio_format": "mp3"}))
    assert [(e["error"]["code"], e["error"]["param"]) for e in bad] == [("invalid_value", "session.input_audio_format")]


TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"instructions": "Answer in French."}, "session.instructions"),
        ({"tools": [TOOL]}, "session.tools"),
        ({"audio": {"output": {"voice": "marin"}}}, "session.audio.output"),
    ],
)
def test_fields_of_responses_are_refused_on_a_transcription_session(fields: dict, param: str) -> None:
    """OpenAI's transcription session object is only ``type``, ``audio.input`` and ``include``
    (RealtimeTranscriptionSessionCreateRequest); anything else is ``unknown_parameter``. On main
    ``instructions``, ``tools`` and ``audio.output.voice`` were accepted in silence and did nothing
    (no response is ever made): a client believed them applied. Now refused, nothing applied, the
    session going on; a realtime session still takes them."""
    h, _ = _transcribing()
    before = h.pipeline.settings
    for session in ({"type": "transcription", **fields}, fields):
        sent = h.run(client("session.update", session=session))
        assert [(e["type"], e["error"]["code"], e["error"]["param"]) for e in sent] == [
            ("error", "unknown_parameter", param)
        ], sent
        assert sent[0]["error"]["message"].startswith(f"Unknown parameter: '{param}'.")
    assert h.pipeline.settings == before
    becoming = Harness()  # a realtime session that an update with them would make a transcription one
    sent = becoming.run(client("session.update", session={"type": "transcription", **fields}))
    assert [e["error"]["code"] for e in sent] == ["unknown_parameter"]
    assert becoming.pipeline.settings.turn.create_response is True
    realtime = Harness()
    assert [e["type"] for e in realtime.run(client("session.update", session={"type": "realtime", **fields}))] == [
        "session.updated"
    ]
    beta = Harness()
    flat = {"instructions": "Answer in French."}
    refused = beta.run(client("transcription_session.update", session=flat))
    assert [(e["error"]["code"], e["error"]["param"]) for e in refused] == [
        ("unknown_parameter", "session.instructions")
    ]
