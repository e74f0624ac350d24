"""A reply's pace (``gateway.pipeline.pacing``): its first clause is due when the turn was asked,
its later tokens a lead before the audio already written runs out. Given timestamps, no clock."""

from __future__ import annotations

import pytest

from gateway.pipeline.latency import TurnLatency
from gateway.pipeline.pacing import FIRST_AUDIO_S, LEAD_S, SPEAKING_WORDS_PER_S, ReplyPace


def test_the_first_clause_is_due_when_the_turn_was_asked() -> None:
    latency = TurnLatency(response_requested=50.0)
    pace = ReplyPace(latency)
    assert pace.due() == 50.0 and pace.heard_until() is None


def test_later_tokens_are_due_a_lead_before_the_written_audio_runs_out() -> None:
    latency = TurnLatency(response_requested=50.0)
    pace = ReplyPace(latency)
    pace.spoken(5, now=51.0)  # the first clause, before its audio plays
    assert pace.heard_until() == pytest.approx(51.0 + FIRST_AUDIO_S + 5 / SPEAKING_WORDS_PER_S)
    latency.first_audio_frame = 51.3  # it plays
    pace.spoken(12, now=52.0)
    until = 51.3 + 17 / SPEAKING_WORDS_PER_S
    assert pace.heard_until() == pytest.approx(until)
    assert pace.due() == pytest.approx(until - LEAD_S)


def test_a_faster_voice_makes_later_tokens_due_sooner() -> None:
    normal, fast = ReplyPace(TurnLatency(response_requested=0.0)), ReplyPace(TurnLatency(response_requested=0.0), 1.5)
    for pace in (normal, fast):
        pace.spoken(30, now=1.0)
    assert fast.due() < normal.due()


def test_a_held_preemptive_reply_has_no_deadline_until_its_response_adopts_it() -> None:
    from gateway.models.compute.deadline import NO_DEADLINE
    from gateway.pipeline.preemption import ReplyHold

    latency = TurnLatency()  # started at the pause: no response asked yet
    hold = ReplyHold()
    pace = ReplyPace(latency, asked_at=40.0, hold=hold)
    assert pace.due() == NO_DEADLINE
    pace.spoken(5, now=41.0)  # its first clause, made while held
    assert pace.due() == NO_DEADLINE
    hold.adopt(42.0)  # the turn ended with the same words
    assert pace.due() == pytest.approx(41.0 + FIRST_AUDIO_S + 5 / SPEAKING_WORDS_PER_S - LEAD_S)
    fresh = ReplyPace(TurnLatency(), asked_at=40.0, hold=ReplyHold())
    fresh._hold.adopt(42.0)  # adopted before any text: its first clause is due when it was asked
    assert fresh.due() == 42.0


def test_a_held_reply_that_gave_way_can_never_be_adopted() -> None:
    from gateway.models.compute.deadline import NO_DEADLINE
    from gateway.pipeline.preemption import ReplyHold

    others = {"wait": False}
    hold = ReplyHold(lambda: others["wait"])
    assert not hold.gives_way()
    others["wait"] = True  # another caller's turn waits for the LLM
    assert hold.gives_way() and not hold.adopt(42.0) and hold.due(50.0) == NO_DEADLINE
    adopted = ReplyHold(lambda: True)
    assert adopted.adopt(42.0) and not adopted.gives_way(), "once adopted it is a reply like any other"
