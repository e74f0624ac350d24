"""The barge-in knobs of ``turn_detection`` (gateway extensions): validated like OpenAI's own
fields, reach the pipeline, reset when a new object leaves them out, and stay out of the view."""

from __future__ import annotations

from gateway.pipeline import events as pe
from tests.realtime.harness import SID, Harness, client


def turn_update(**fields: object) -> dict:
    return {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "server_vad", **fields}}}}


def test_knobs_reach_the_pipeline_and_a_new_object_resets_them() -> None:
    h = Harness()
    knobs = dict(min_interruption_words=2, max_backchannel_ms=900, false_interruption_timeout_ms=1500, echo_guard=False)
    session = h.run(client("session.update", session=turn_update(**knobs)))[-1]["session"]
    turn = h.pipeline.settings.turn
    assert (turn.min_interruption_words, turn.max_backchannel_ms, turn.false_interruption_timeout_ms) == (2, 900, 1500)
    assert turn.echo_guard is False
    assert "min_interruption_words" not in session["audio"]["input"]["turn_detection"]  # OpenAI's shape
    h.run(client("session.update", session=turn_update(threshold=0.6)))
    turn = h.pipeline.settings.turn
    assert (turn.min_interruption_words, turn.echo_guard) == (1, True)


def test_semantic_vad_takes_the_knobs_too() -> None:
    h = Harness()
    update = {
        "type": "realtime",
        "audio": {"input": {"turn_detection": {"type": "semantic_vad", "min_interruption_words": 0}}},
    }
    h.run(client("session.update", session=update))
    assert h.pipeline.settings.turn.min_interruption_words == 0


def test_a_bad_knob_is_an_error_naming_it() -> None:
    h = Harness()
    error = h.run(client("session.update", session=turn_update(min_interruption_words="two")))[-1]
    assert error["type"] == "error"
    assert error["error"]["param"] == "session.audio.input.turn_detection.min_interruption_words"
    error = h.run(client("session.update", session=turn_update(max_backchannel_ms=5)))[-1]
    assert error["error"]["param"] == "session.audio.input.turn_detection.max_backchannel_ms"


def test_barge_in_decision_becomes_a_gateway_event_for_a_client_that_asks() -> None:
    decision = pe.BargeInDecided(SID, decision="resumed", transcript="Yeah.", audio_start_ms=2000, decided_ms=2600)
    stock = Harness()
    stock.rt.on_pipeline_event(decision)
    assert not [e for e in stock.sent if e["type"] == "gateway.barge_in"]  # OpenAI's events only
    h = Harness(extensions=frozenset({"gateway.barge_in"}))
    h.rt.on_pipeline_event(decision)
    event = h.last("gateway.barge_in")
    assert (event["decision"], event["transcript"], event["audio_start_ms"], event["decided_ms"]) == (
        "resumed",
        "Yeah.",
        2000,
        2600,
    )
