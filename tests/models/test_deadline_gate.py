"""The gate of the shared speech models (``gateway.models.compute.deadline.DeadlineGate``): a free
slot goes to the earliest deadline that is not far ahead, speculative work last; work far ahead
waits even with the slot free; a waiter whose call is cancelled leaves at once. Real threads; the
order is checked, never a duration."""

from __future__ import annotations

import threading
import time

from gateway.models.compute.deadline import NO_DEADLINE, DeadlineGate, Urgency, urgency
from tests.helpers import wait_for


def test_the_slot_goes_earliest_deadline_first_and_speculative_work_last() -> None:
    gate = DeadlineGate(slots=1, poll_s=0.005)
    order: list[str] = []
    now = time.monotonic()
    wanted = {"read-ahead": NO_DEADLINE, "later sentence": now + 2.0, "first clause": now - 1.0}

    def call(name: str) -> None:
        with gate.slot(wanted[name]) as granted:
            assert granted
            order.append(name)

    with gate.slot(now) as held:  # a synthesis in progress
        assert held
        threads = [threading.Thread(target=call, args=(name,)) for name in wanted]
        for thread in threads:
            thread.start()
        assert wait_for(lambda: gate.waiting == 3)
    for thread in threads:
        thread.join(10)
    assert order == ["first clause", "later sentence", "read-ahead"]


def test_work_far_ahead_waits_with_the_slot_free_and_a_cancel_leaves_at_once() -> None:
    gate = DeadlineGate(slots=1, poll_s=0.005)
    cancelled = threading.Event()
    outcome: list[bool] = []

    def far_ahead() -> None:  # its audio is 60 s ahead of its playout
        with gate.slot(time.monotonic() + 60.0, cancelled.is_set) as granted:
            outcome.append(granted)

    thread = threading.Thread(target=far_ahead)
    thread.start()
    assert wait_for(lambda: gate.waiting == 1)
    with gate.slot(time.monotonic()) as granted:
        assert granted, "due work is not held up by work that is paused"
    assert thread.is_alive() and outcome == []
    cancelled.set()  # a barge-in
    thread.join(10)
    assert outcome == [False] and gate.waiting == 0


def test_urgency_classes() -> None:
    assert urgency(9.0, now=10.0) is Urgency.DUE
    assert urgency(10.2, now=10.0) is Urgency.DUE, "within the horizon"
    assert urgency(12.0, now=10.0) is Urgency.AHEAD
    assert urgency(20.0, now=10.0) is Urgency.PAUSED
    assert urgency(NO_DEADLINE, now=10.0) is Urgency.SPECULATIVE


def test_a_waiter_whose_deadline_comes_sooner_is_served_by_its_new_one() -> None:
    """A held preemptive reply's sentence waits with no deadline; once its response adopts it, its
    due time (asked again while it waits) puts it before work due later."""
    gate = DeadlineGate(slots=1, poll_s=0.005)
    order: list[str] = []
    adopted = threading.Event()
    now = time.monotonic()

    def held_due() -> float:
        return now - 1.0 if adopted.is_set() else NO_DEADLINE

    def call(name: str, due) -> None:
        with gate.slot(due) as granted:
            assert granted
            order.append(name)

    with gate.slot(now) as held:
        assert held
        threads = [
            threading.Thread(target=call, args=("preemptive", held_due)),
            threading.Thread(target=call, args=("later sentence", now + 2.0)),
        ]
        for thread in threads:
            thread.start()
        assert wait_for(lambda: gate.waiting == 2)
        adopted.set()
    for thread in threads:
        thread.join(10)
    assert order == ["preemptive", "later sentence"]
