"""The shared engine's queue: FIFO admission, cancellable waits, measured queue wait (no model)."""

from __future__ import annotations

import threading
import time

from gateway.models.compute.engine_queue import EngineQueue


def test_callers_are_admitted_in_arrival_order_and_waits_are_measured() -> None:
    queue = EngineQueue(slots=1)
    order: list[int] = []
    release = threading.Event()

    def holder() -> None:
        with queue.turn(lambda: False) as turn:
            assert turn is not None
            release.wait(5)

    def caller(index: int) -> None:
        with queue.turn(lambda: False) as turn:
            assert turn is not None
            order.append(index)

    first = threading.Thread(target=holder)
    first.start()
    time.sleep(0.05)
    threads = []
    for index in range(5):
        thread = threading.Thread(target=caller, args=(index,))
        thread.start()
        threads.append(thread)
        time.sleep(0.03)  # a definite arrival order
    assert queue.waiting == 5
    time.sleep(0.2)
    release.set()
    for thread in [first, *threads]:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]
    snapshot = queue.stats.snapshot()
    assert snapshot.count == 6
    assert snapshot.sum_ms >= 5 * 200  # each of the five waited at least the 0.2 s the holder held on


def test_a_cancelled_waiter_leaves_the_queue_at_once() -> None:
    queue = EngineQueue(slots=1)
    cancelled = threading.Event()
    results: list[object] = []
    with queue.turn(lambda: False):

        def waiter() -> None:
            started = time.monotonic()
            with queue.turn(cancelled.is_set) as turn:
                results.append((turn, time.monotonic() - started))

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.1)
        cancelled.set()
        thread.join(2)
        assert not thread.is_alive(), "a cancelled waiter must not wait for the engine"
    turn, _waited = results[0]
    assert turn is None  # it left while the turn above was still held: it did not wait for it
    assert queue.waiting == 0


def test_requeue_lets_the_waiting_caller_through_first() -> None:
    queue = EngineQueue(slots=1)
    order: list[str] = []
    with queue.turn(lambda: False) as long_turn:
        assert long_turn is not None
        short = threading.Thread(target=lambda: _run(queue, order, "short"))
        short.start()
        while queue.waiting == 0:
            time.sleep(0.01)
        assert long_turn.others_waiting
        assert long_turn.requeue(lambda: False)
        order.append("long resumes")
        short.join(2)
    assert order == ["short", "long resumes"]


def test_unlimited_slots_admit_everyone_at_once() -> None:
    queue = EngineQueue(slots=0)
    with queue.turn(lambda: False) as one, queue.turn(lambda: False) as two:
        assert one is not None and two is not None


def _run(queue: EngineQueue, order: list[str], name: str) -> None:
    with queue.turn(lambda: False):
        order.append(name)
