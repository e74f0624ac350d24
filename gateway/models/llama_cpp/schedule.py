"""Which evaluations one step of the batched decoder advances, by deadline (``gateway.models.compute.deadline``).

Each pending :class:`~gateway.models.llama_cpp.holds.Evaluation` carries ``due`` (monotonic s): a
turn's prompt and first clause are due when the turn was asked, a reply's later tokens when its
playout would run dry less a lead (its caller's pace), warms and read-aheads have no deadline. A
step takes one class only, the most urgent present:

1. **due** work (deadline within ``HORIZON_S``): first clauses and replies about to run dry, and a
   warm a due turn waits for; batched together, earliest deadline first for the prompt chunks;
2. else **ahead** replies (deadline within ``PAUSE_AHEAD_S``) and the session warms (instructions
   and tools read at call start): a reply that holds seconds of audio never slows a first clause;
3. else the **speculative** reads (a prompt read ahead at a caller's pause, a reply begun at it and
   held), and only while no turn is between two samples (its next token would share the step);
   while other calls are connected, at most :data:`SPECULATIVE_CHUNK` prompt tokens a step (the
   decoder passes ``speculative_chunk``): a step in flight cannot be stopped, and another caller's
   turn asked meanwhile waits for it.

Replies further ahead are **paused**: left out of every step until their deadline comes within
``PAUSE_AHEAD_S`` (``StepPlan.wake_at``), so that compute is not spent seconds before it is needed.
A step holds every single-token decode of its class and then prompt chunks in deadline order: up
to ``chunk`` tokens of a prompt read with no decode beside it, ``shared_chunk`` beside decodes,
while there is room (the earliest prompt first, the next one what is left). Pure logic: the
decoder's step thread calls :func:`plan_step`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Optional

from gateway.models.compute.deadline import PAUSE_AHEAD_S, Urgency, urgency
from gateway.models.llama_cpp.holds import Evaluation

# Prompt tokens a speculative step reads at most while other calls are connected. Reading a
# prompt is compute-bound on a CPU: ~20 ms a token on 2 idle threads of a slow 2-core box, ~80 ms
# on one thread beside six callers' speech models, where a 32-token read-ahead step held a new
# turn back 2.6 s (stop 42's trace); 8 tokens hold it back at most ~0.7 s, and cost little more
# per token than longer steps. (A lone call's read-ahead keeps whole chunks: its own turn is the
# only one to wait, and a prompt read in other chunk sizes is the same up to float rounding, which
# can change a greedy answer's words.)
SPECULATIVE_CHUNK = 8

# Prompt tokens any step reads at most while a lone call's other heavy model call runs (the
# decoder passes ``busy_chunk``). Such a step runs on one thread (two collapse on a busy core) and
# its thread count holds to its end, while the other call is often short: the end-of-turn model
# (~50-130 ms) runs just as the pause's transcript comes back and its reply's prompt is read, and a
# 9-token read begun beside it took 355 ms on one thread, ~170 on two once the core is free.
# Small reads cost the same per token on this CPU (1 thread: ~34-38 ms a token for 2-12
# tokens; 2 threads: ~18), so 4-token steps let the next one take both cores as soon as they are
# free. (The last logits of a 9- and a 36-token read came out bit-identical read whole or in 1-,
# 4- or 8-token steps, on 1 or 2 threads, with this box's zen4 kernels.) An A/B over five held-out
# questions (``bench_turn.py``, stop 50): the read 366 -> 290 ms for "10 of clubs", 413 -> 330 for
# 0880; jfk's 323 -> 351, within its spread (docs/BENCHMARKS.md, stop 50).
BUSY_CHUNK = 4


@dataclass
class StepPlan:
    """One step: ``items`` (evaluation, how many of its tokens), ``wake_at``, the monotonic
    second at which the earliest paused evaluation may be planned (None: none is paused), and
    ``urgency``, the class its items are of (None: no items)."""

    items: list[tuple[Evaluation, int]] = field(default_factory=list)
    wake_at: Optional[float] = None
    urgency: Optional[Urgency] = None

    @property
    def yielding(self) -> bool:
        """True for a step of speculative work only (read-aheads, preemptive replies held unadopted):
        work no turn waits for, which gives way to any that does."""
        return self.urgency is Urgency.SPECULATIVE


def step_class(evaluation: Evaluation, now: float) -> Urgency:
    """The class of ``evaluation`` at ``now``: a turn's by its deadline; a warm is ``SPECULATIVE``
    (a read-ahead), ``AHEAD`` (a session's warm) or, once a turn waits for it, that turn's."""
    if not evaluation.warm:
        return urgency(evaluation.due, now)
    if evaluation.due <= now + PAUSE_AHEAD_S:  # promoted: a turn waits for it
        return urgency(evaluation.due, now)
    return Urgency.SPECULATIVE if evaluation.speculative else Urgency.AHEAD


def plan_step(
    pending: Sequence[Evaluation],
    now: float,
    *,
    capacity: int,
    chunk: int,
    shared_chunk: int,
    turns_between_samples: bool = False,
    leased: Callable[[int], bool] = lambda seq: True,
    speculative_chunk: Optional[int] = None,
    busy_chunk: Optional[int] = None,
) -> StepPlan:
    """The step for the resolved, live evaluations of ``pending`` at ``now`` (see the module
    docstring). ``capacity``: tokens a step may hold; ``turns_between_samples``: a leased sequence
    is about to send its next token (it holds speculative reads back); ``leased(seq)``: the
    sequence is a turn's (its prompt is read before a warm's of the same deadline);
    ``speculative_chunk``: prompt tokens a speculative step reads at most (None: as any other);
    ``busy_chunk``: prompt tokens any step reads at most (None: no such cap; see :data:`BUSY_CHUNK`)."""
    live = [e for e in pending if e.resolved and not e.abandoned and e.tokens]
    classes = {id(e): step_class(e, now) for e in live}
    paused = [e.due - PAUSE_AHEAD_S for e in live if classes[id(e)] is Urgency.PAUSED]
    plan = StepPlan(wake_at=min(paused) if paused else None)
    present = {classes[id(e)] for e in live}
    for wanted in (Urgency.DUE, Urgency.AHEAD, Urgency.SPECULATIVE):
        if wanted in present:
            break
    else:
        return plan
    if wanted is Urgency.SPECULATIVE and turns_between_samples:
        return plan
    plan.urgency = wanted
    chosen = sorted((e for e in live if classes[id(e)] is wanted), key=lambda e: (e.due, not leased(e.seq)))
    decoding = [e for e in chosen if len(e.tokens) == 1]
    reading = [e for e in chosen if len(e.tokens) > 1]
    plan.items = [(e, 1) for e in decoding[:capacity]]
    room = capacity - len(plan.items)
    share = chunk if not decoding else shared_chunk
    if wanted is Urgency.SPECULATIVE and speculative_chunk is not None:
        share = min(share, speculative_chunk)
    if busy_chunk is not None:
        share = min(share, busy_chunk)
    for e in reading:
        take = min(len(e.tokens), share, room)
        if take <= 0:
            break
        plan.items.append((e, take))
        room -= take
    return plan
