"""The order the batched LLM decoder serves its evaluations in (``gateway.models.llama_cpp.schedule``):
earliest deadline first; a first clause is never slowed by a reply that holds seconds of audio; a
reply far ahead of its playout waits; speculative reads run last; cancelled work is never planned.
The pure planning logic, on evaluations as the decoder holds them (no model, no clock)."""

from __future__ import annotations

from gateway.models.compute.deadline import HORIZON_S, NO_DEADLINE, PAUSE_AHEAD_S
from gateway.models.llama_cpp.holds import Evaluation
from gateway.models.llama_cpp.schedule import BUSY_CHUNK, SPECULATIVE_CHUNK, plan_step

NOW = 1000.0


def work(seq: int, tokens: int, due: float, warm: bool = False, speculative: bool = False) -> Evaluation:
    """An evaluation of sequence ``seq`` with ``tokens`` left to read (1: a decode), resolved."""
    left = list(range(tokens))
    return Evaluation(seq, left, resolved=True, tokens=left, warm=warm, speculative=speculative, due=due)


def plan(
    *pending: Evaluation, between: bool = False, capacity: int = 40, others_connected: bool = True, busy: bool = False
):
    return plan_step(
        list(pending),
        NOW,
        capacity=capacity,
        chunk=32,
        shared_chunk=16,
        turns_between_samples=between,
        speculative_chunk=SPECULATIVE_CHUNK if others_connected else None,
        busy_chunk=BUSY_CHUNK if busy else None,
    )


def test_a_first_clause_takes_the_step_from_a_reply_that_holds_seconds_of_audio() -> None:
    first_clause = work(0, 1, due=NOW - 0.8)  # its turn was asked 0.8 s ago
    reply = work(1, 1, due=NOW + 2.0)  # its audio runs dry in 4.5 s
    step = plan(reply, first_clause)
    assert [e for e, _ in step.items] == [first_clause]
    alone = plan(reply)
    assert [e for e, _ in alone.items] == [reply], "with no first clause waiting, the reply goes on"


def test_due_work_is_batched_and_prompts_get_room_earliest_deadline_first() -> None:
    late_reply = work(0, 1, due=NOW - 0.1)  # about to run dry: as due as a first clause
    older = work(1, 30, due=NOW - 2.0)
    newer = work(2, 30, due=NOW - 1.0)
    step = plan(newer, late_reply, older, capacity=1 + 20)
    assert step.items[0] == (late_reply, 1), "every due decode is in the step"
    assert step.items[1][0] is older and step.items[1][1] == 16, "the older turn's prompt first, a shared chunk"
    assert step.items[2] == (newer, 4), "the newer one gets what room is left"
    soon = work(3, 1, due=NOW + HORIZON_S / 2)
    assert soon in [e for e, _ in plan(soon, late_reply).items], "due within the horizon joins the batch"


def test_a_reply_far_ahead_of_its_playout_waits_until_its_deadline_comes_near() -> None:
    far = work(0, 1, due=NOW + 9.0)
    step = plan(far)
    assert step.items == []
    assert step.wake_at == NOW + 9.0 - PAUSE_AHEAD_S, "planned again once it is no longer far ahead"


def test_speculative_reads_run_only_when_no_turn_needs_the_step() -> None:
    read_ahead = work(4, 40, due=NO_DEADLINE, warm=True, speculative=True)
    reply = work(1, 1, due=NOW + 1.0)
    assert [e for e, _ in plan(read_ahead, reply).items] == [reply], "after a reply that is ahead"
    assert [e for e, _ in plan(read_ahead, work(0, 1, due=NOW)).items] != [read_ahead]
    paused = work(2, 1, due=NOW + 30.0)
    assert [e for e, _ in plan(read_ahead, paused).items] == [read_ahead], "a paused reply leaves it room"
    assert plan(read_ahead, between=True).items == [], "a turn between two samples holds it back"
    assert plan(read_ahead).items == [(read_ahead, SPECULATIVE_CHUNK)], "alone, a short step"


def test_a_speculative_step_is_short_so_a_turn_asked_meanwhile_waits_little() -> None:
    """A step in flight cannot be stopped: while other calls are connected, a read-ahead or a held
    reply's prompt reads at most ``SPECULATIVE_CHUNK`` tokens a step (before: a whole 32-token
    chunk, 2.6 s on one busy thread, that another caller's turn asked meanwhile waited for), while a
    turn's own prompt alone still reads a whole chunk, and a lone call's read-ahead too."""
    held_reply = work(3, 40, due=NO_DEADLINE)  # a reply begun at the caller's pause, not yet adopted
    assert plan(held_reply).items == [(held_reply, SPECULATIVE_CHUNK)]
    assert SPECULATIVE_CHUNK <= 8
    turn = work(0, 40, due=NOW)
    assert plan(turn, held_reply).items == [(turn, 32)], "a due prompt alone: a whole chunk"
    assert plan(held_reply, others_connected=False).items == [(held_reply, 32)], "a lone call's"


def test_a_warm_a_turn_waits_for_is_read_as_that_turn_is_due() -> None:
    session_warm = work(5, 40, due=NO_DEADLINE, warm=True)
    reply = work(1, 1, due=NOW - 0.5)
    assert [e for e, _ in plan(session_warm, reply).items] == [reply], "no deadline: after due work"
    session_warm.due = NOW - 0.4  # a due turn waits for it (BatchDecoder._warming_for)
    assert [e for e, _ in plan(session_warm, reply).items] == [reply, session_warm]


def test_cancelled_work_is_never_planned() -> None:
    first_clause = work(0, 1, due=NOW - 1.0)
    first_clause.abandoned = True
    reply = work(1, 1, due=NOW + 2.0)
    assert [e for e, _ in plan(first_clause, reply).items] == [reply], "the reply gets the step at once"


def test_while_the_cores_are_busy_a_prompt_is_read_in_short_steps() -> None:
    """A step's threads hold to its end: while a lone call's other model call runs, a turn's prompt
    is read ``BUSY_CHUNK`` tokens a step, so that the step after that call ends takes both cores."""
    turn = work(0, 9, due=NOW)
    assert plan(turn, others_connected=False).items == [(turn, 9)], "free cores: the whole prompt"
    assert plan(turn, others_connected=False, busy=True).items == [(turn, BUSY_CHUNK)]
    assert 2 <= BUSY_CHUNK <= 4
    reply = work(1, 1, due=NOW - 0.1)
    step = plan(reply, turn, others_connected=False, busy=True)
    assert step.items == [(reply, 1), (turn, BUSY_CHUNK)], "decodes are untouched, prompts capped"
