"""The preemptive reply setting of a session (``"preemptive_reply"`` in the session object, either
shape; a gateway extension): validated like OpenAI's own fields, reaches the pipeline's call
settings, kept when an update leaves it out, and stays out of the view a stock client validates.
A real call that turns it off and on: ``tests/e2e/test_preemptive_reply_call.py``."""

from __future__ import annotations

from gateway.config import GatewayConfig
from gateway.realtime.session_settings import SessionSettings
from tests.doubles import PipelineControlDouble
from tests.realtime.harness import Harness, client


def test_the_operators_default_until_a_session_turns_it_off_then_on() -> None:
    h = Harness()
    assert h.pipeline.settings.preemptive_reply is True
    session = h.run(client("session.update", session={"type": "realtime", "preemptive_reply": False}))[-1]
    assert session["type"] == "session.updated" and "preemptive_reply" not in session["session"]
    assert h.pipeline.settings.preemptive_reply is False
    h.run(client("session.update", session={"instructions": "Be brief."}))
    assert h.pipeline.settings.preemptive_reply is False, "an update without it keeps it"
    h.run(client("session.update", session={"type": "realtime", "preemptive_reply": True}))
    assert h.pipeline.settings.preemptive_reply is True


def test_the_beta_shape_takes_it_too() -> None:
    h = Harness()
    session = h.run(client("session.update", session={"voice": "alloy", "preemptive_reply": False}))[-1]["session"]
    assert h.pipeline.settings.preemptive_reply is False
    assert "preemptive_reply" not in session


def test_a_bad_value_is_an_error_naming_it() -> None:
    h = Harness()
    error = h.run(client("session.update", session={"type": "realtime", "preemptive_reply": "no"}))[-1]
    assert error["type"] == "error"
    assert error["error"]["param"] == "session.preemptive_reply"
    assert h.pipeline.settings.preemptive_reply is True, "a rejected update leaves the session as it was"


def test_a_session_of_an_operator_who_turned_it_off_starts_off() -> None:
    control = PipelineControlDouble(GatewayConfig(preemptive_reply=False))
    assert SessionSettings.from_pipeline(control.current_settings()).call.preemptive_reply is False
