"""``audio.input.noise_reduction`` (beta ``input_audio_noise_reduction``) in session.update: accepted,
echoed in session.updated, handed to the pipeline, and refused with a clear error when invalid."""

from __future__ import annotations

from tests.realtime.harness import Harness, client


def update(h: Harness, session: dict) -> list[dict]:
    return h.run(client("session.update", session=session))


def test_ga_noise_reduction_is_echoed_and_reaches_the_pipeline() -> None:
    h = Harness()
    assert h.last("session.created")["session"]["audio"]["input"]["noise_reduction"] is None
    sent = update(h, {"type": "realtime", "audio": {"input": {"noise_reduction": {"type": "near_field"}}}})
    assert [e["type"] for e in sent] == ["session.updated"], sent
    assert sent[0]["session"]["audio"]["input"]["noise_reduction"] == {"type": "near_field"}
    assert h.pipeline.settings.noise_reduction == "near_field"
    # an update that leaves the field out keeps it; null turns it off
    kept = update(h, {"type": "realtime", "instructions": "Be brief."})[0]["session"]
    assert kept["audio"]["input"]["noise_reduction"] == {"type": "near_field"}
    off = update(h, {"type": "realtime", "audio": {"input": {"noise_reduction": None}}})[0]["session"]
    assert off["audio"]["input"]["noise_reduction"] is None and h.pipeline.settings.noise_reduction is None


def test_beta_noise_reduction_is_echoed() -> None:
    h = Harness()
    sent = update(h, {"modalities": ["text", "audio"], "input_audio_noise_reduction": {"type": "far_field"}})
    assert sent[0]["session"]["input_audio_noise_reduction"] == {"type": "far_field"}, sent
    assert h.pipeline.settings.noise_reduction == "far_field"


def test_an_invalid_noise_reduction_is_a_clear_error_and_changes_nothing() -> None:
    h = Harness()
    update(h, {"type": "realtime", "audio": {"input": {"noise_reduction": {"type": "near_field"}}}})
    for bad in ({"type": "office"}, {}, "near_field", {"type": 1}):
        sent = update(h, {"type": "realtime", "audio": {"input": {"noise_reduction": bad}}})
        assert [e["type"] for e in sent] == ["error"], (bad, sent)
        error = sent[0]["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_value", error
        assert error["param"].startswith("session.audio.input.noise_reduction"), error
        assert "noise_reduction" in error["message"], error
    assert h.pipeline.settings.noise_reduction == "near_field"
