"""The thinking cue setting of a session (``audio.output.thinking_cue``, beta ``thinking_cue``; a
gateway extension): validated like OpenAI's own fields, reaches the pipeline, kept when an update
leaves it out, and stays out of the view a stock client validates."""

from __future__ import annotations

import pytest

from gateway.config import GatewayConfig
from gateway.realtime.session_settings import SessionSettings
from tests.doubles import PipelineControlDouble
from tests.realtime.harness import Harness, client


def output_update(**fields: object) -> dict:
    return {"type": "realtime", "audio": {"output": fields}}


def test_off_by_default_and_a_session_turns_it_on_then_off() -> None:
    h = Harness()
    assert h.pipeline.settings.thinking_cue == "off"
    session = h.run(client("session.update", session=output_update(thinking_cue="tone")))[-1]["session"]
    assert h.pipeline.settings.thinking_cue == "tone"
    assert "thinking_cue" not in session["audio"]["output"]  # OpenAI's shape
    h.run(client("session.update", session={"instructions": "Be brief."}))
    assert h.pipeline.settings.thinking_cue == "tone"  # an update without it keeps it
    h.run(client("session.update", session=output_update(thinking_cue="off")))
    assert h.pipeline.settings.thinking_cue == "off"


def test_the_beta_shape_takes_it_flat() -> None:
    h = Harness()
    session = h.run(client("session.update", session={"voice": "alloy", "thinking_cue": "filler"}))[-1]["session"]
    assert h.pipeline.settings.thinking_cue == "filler"
    assert "thinking_cue" not in session


def test_a_bad_value_is_an_error_naming_it() -> None:
    h = Harness()
    error = h.run(client("session.update", session=output_update(thinking_cue="beep")))[-1]
    assert error["type"] == "error"
    assert error["error"]["param"] == "session.audio.output.thinking_cue"
    assert h.pipeline.settings.thinking_cue == "off"


def test_the_server_wide_default_is_what_a_session_starts_with() -> None:
    control = PipelineControlDouble(GatewayConfig(thinking_cue="tone"))
    assert SessionSettings.from_pipeline(control.current_settings()).call.thinking_cue == "tone"


def test_the_server_wide_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="thinking_cue"):
        GatewayConfig(thinking_cue="beep")
    assert GatewayConfig.from_env({"VG_THINKING_CUE": "filler"}).thinking_cue == "filler"
