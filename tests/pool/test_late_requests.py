"""Defects found in review in realtime/ and pool/: a closed session or a draining unit must not act
on a late request of the ended call (each test failed before its fix)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from gateway.config import GatewayConfig
from gateway.models.base import ModelSet
from gateway.realtime.session import RealtimeSession
from tests.doubles import PipelineControlDouble, TimersDouble
from tests.realtime.harness import LOCAL


def test_closed_realtime_session_does_not_drive_the_pipeline() -> None:
    pipeline, timers = PipelineControlDouble(), TimersDouble()
    sent: list[dict] = []
    session = RealtimeSession(
        pipeline, sent.append, local_models=LOCAL, call_later=timers.call_later, clock=timers.clock
    )
    session.start()
    session.close("client_hangup")
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    for event in (
        {"type": "conversation.item.create", "item": item},
        {"type": "response.create"},
        {"type": "input_audio_buffer.commit"},
        {"type": "input_audio_buffer.clear"},
        {"type": "output_audio_buffer.clear"},
    ):
        session.handle_client_message(json.dumps(event))
    assert pipeline.calls == [], pipeline.calls


async def test_a_response_requested_while_draining_does_not_reach_the_next_call(
    models: ModelSet, gateway_config: Callable[..., GatewayConfig]
) -> None:
    import asyncio

    from gateway.models.base import ChatMessage
    from gateway.pipeline.messages import Message, ResponseRequest
    from gateway.pool.unit import PipelineUnit, UnitState
    from tests.helpers import wait_until

    unit = PipelineUnit(0, models, gateway_config(), asyncio.get_running_loop())
    reached_llm: list[ResponseRequest] = []  # every request put on the LLM stage's queue
    put = unit.chain.llm_in.put

    def recording_put(message: Message) -> None:
        if isinstance(message, ResponseRequest):
            reached_llm.append(message)
        put(message)

    unit.chain.llm_in.put = recording_put  # type: ignore[assignment]
    try:
        assert unit.claim("rtc_first", lambda event: None)
        unit.call_state.settings = replace(unit.settings, max_tokens=2)
        unit.begin_drain("client_hangup")
        try:  # what a late client event of the ended call asks (refusing it is fine too)
            unit.create_response([ChatMessage("user", "hello")], audio=False)
        except RuntimeError:
            pass
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 15)
        assert unit.claim("rtc_second", lambda event: None)
        unit.create_response([ChatMessage("user", "hi")], audio=False, max_tokens=2)  # the recorder sees requests
        assert [request.call_id for request in reached_llm] == ["rtc_second"], (
            "a response of the ended call reached the LLM stage"
        )
    finally:
        unit.close()
        unit.join(5)


async def test_a_lease_goes_inert_once_its_unit_is_released(
    models: ModelSet, gateway_config: Callable[..., GatewayConfig]
) -> None:
    """The lease ``UnitPool.claim`` returns is the call's only handle on the unit: once released
    (and after the unit serves the next caller) nothing of the ended call can act on it."""

    import numpy as np
    import pytest

    from gateway.models.base import ChatMessage
    from gateway.pool.pool import UnitPool
    from gateway.pool.unit import UnitState
    from tests.helpers import wait_until

    pool = UnitPool(models, gateway_config(pool_size=1))
    try:
        first = pool.claim("rtc_first", lambda event: None)
        assert first.live and not first.busy() and first.input_rate == models.vad.sample_rate
        assert first.release("client_hangup") and not first.release("client_hangup")
        unit = pool.units[0]
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 15)
        second = pool.claim("rtc_second", lambda event: None)
        assert unit.call_id == "rtc_second" and second.live and not first.live
        frames: list[int] = []
        unit.on_input_frame = lambda samples, rate: frames.append(samples)
        with pytest.raises(RuntimeError):
            first.create_response([ChatMessage("user", "hello")], audio=False)
        first.commit_input()
        first.submit_audio(np.zeros(320, np.int16), 0.0)
        first.apply_settings(replace(unit.settings, instructions="ended", max_tokens=1, language="fr"))
        assert first.interrupt() is None and not first.busy() and first.idle_for_s() == 0.0
        assert not first.release("client_hangup") and unit.state is UnitState.ACTIVE
        assert unit.settings.instructions != "ended" and unit.settings.language != "fr"
        assert frames == []  # the ended call's audio never reached the next caller's VAD
        second.release("client_hangup")
        assert await wait_until(lambda: unit.state is UnitState.IDLE, 15)
    finally:
        pool.close()
