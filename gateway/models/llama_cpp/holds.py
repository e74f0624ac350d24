"""Callers' handles on a :class:`~gateway.models.llama_cpp.batch.BatchDecoder`: a turn's
:class:`SequenceLease` on one KV sequence, a session's :class:`Warm` hold on a prompt read in the
background, and the :class:`Evaluation` each queues on the decoder's step thread.

The handles reach the decoder only through :class:`Steps`, the small face it shows them (queue an
evaluation, abandon one, let go of a warm, read or give back a sequence), so this module does not
import the decoder's."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional, Protocol

import numpy as np

from gateway.models.base import LanguageModelError
from gateway.models.compute.deadline import NO_DEADLINE


@dataclass
class Evaluation:
    """Tokens a sequence must still read; ``logits`` set (a copy) when the last one has been read."""

    seq: int
    wanted: list[int]  # every token the sequence must hold when done
    reuse_others: bool = False  # may copy a prefix from another sequence or a saved state
    resolved: bool = False  # the prefix kept has been settled; ``tokens`` are the ones left to read
    tokens: list[int] = field(default_factory=list)
    kept: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    logits: Optional[np.ndarray] = None
    error: Optional[str] = None
    abandoned: bool = False  # the caller stopped waiting: read no more of it
    warm: bool = False  # a background warm (BatchDecoder.warm), not a turn's
    speculative: bool = False  # a warm for a turn that may not come (a read-ahead): never beside a decode
    holders: int = 0  # a warm's sessions that still want it (abandoned when the last lets go)
    # When it is needed (monotonic s, gateway.models.compute.deadline): a turn's first clause when
    # the turn was asked, a reply's later token by its caller's pace; a warm none until a turn waits for it.
    due: float = NO_DEADLINE


class Steps(Protocol):
    """What the handles need of the decoder whose step thread serves their evaluations (thread-safe)."""

    poll_s: float  # how often a caller waiting for its evaluation checks ``should_stop``, s

    def submit(self, evaluation: Evaluation) -> None:
        """Queue ``evaluation`` for the next step; its sequence stops waiting between two samples."""

    def abandon(self, evaluation: Evaluation) -> None:
        """Read no more of ``evaluation`` (its caller stopped waiting); the step in flight completes."""

    def let_go(self, evaluation: Evaluation) -> None:
        """One holder of a background warm lets go; the last one's let-go abandons it. Never waits
        for a step (a hang-up calls it)."""

    def held(self, seq: int) -> list[int]:
        """The tokens sequence ``seq`` holds now (a copy)."""

    def give_back(self, seq: int) -> None:
        """End the lease on sequence ``seq``: its pending evaluations are abandoned, its cells stay
        (saved to the state cache) for a later turn."""


class Warm:
    """One session's hold on a background warm (:meth:`BatchDecoder.warm`)."""

    def __init__(self, decoder: Steps, evaluation: Evaluation) -> None:
        self._decoder = decoder
        self._evaluation: Optional[Evaluation] = evaluation

    def cancel(self) -> None:
        """Let go (idempotent); the last holder's cancel stops the reading at the next step. The
        tokens read so far stay in the prefix sequence for whoever needs them next."""
        evaluation = self._evaluation
        if evaluation is None:
            return
        self._evaluation = None
        self._decoder.let_go(evaluation)

    @property
    def done(self) -> bool:
        """True once the tokens are read, or the warm stopped or failed."""
        return self._evaluation is None or self._evaluation.done.is_set() or self._evaluation.abandoned


class SequenceLease:
    """One turn's hold on a KV sequence of a :class:`BatchDecoder`; :meth:`release` when done."""

    def __init__(self, decoder: Steps, seq_id: int) -> None:
        self._decoder = decoder
        self.seq_id = seq_id
        self._first = True

    @property
    def tokens(self) -> list[int]:
        """The tokens the sequence holds now (a copy)."""
        return self._decoder.held(self.seq_id)

    def evaluate(
        self,
        tokens: list[int],
        should_stop: Callable[[], bool],
        due: Optional[float] = None,
        reuse_others: bool = False,
        due_of: Optional[Callable[[], float]] = None,
    ) -> tuple[Optional[np.ndarray], int]:
        """Make the sequence hold ``tokens`` and return (logits after the last one, float32 shape
        (n_vocab,); how many tokens were reused rather than read). ``due``: when the logits are
        needed (monotonic s; None: now), the order the decoder serves evaluations in (a reply far
        ahead of its playout waits). Logits are None when ``should_stop`` became True first (the
        read stops at the next step). Raises LanguageModelError when llama.cpp fails the step.
        The turn's first evaluation, or one with ``reuse_others`` (a new prompt after another one),
        may copy a prefix from other sequences. ``due_of``: asked again while the evaluation waits,
        and an earlier answer moves it up (a held preemptive reply adopted by its response)."""
        decoder = self._decoder
        evaluation = Evaluation(self.seq_id, list(tokens), reuse_others=self._first or reuse_others)
        evaluation.due = time.monotonic() if due is None else due
        self._first = False
        decoder.submit(evaluation)
        while not evaluation.done.wait(decoder.poll_s):
            if due_of is not None:
                evaluation.due = min(evaluation.due, due_of())
            if should_stop():
                decoder.abandon(evaluation)
                return None, evaluation.kept
        if evaluation.error:
            raise LanguageModelError(evaluation.error)
        return evaluation.logits, evaluation.kept

    def release(self) -> None:
        """Give the sequence back; its cells stay for a later turn (and are saved to the state cache)."""
        self._decoder.give_back(self.seq_id)


class Warms:
    """One session's hold on several background warms (:class:`~gateway.models.base.PromptWarm`)."""

    def __init__(self, warms: list[Warm]) -> None:
        self._warms = warms

    def cancel(self) -> None:
        for warm in self._warms:
            warm.cancel()

    @property
    def done(self) -> bool:
        return all(warm.done for warm in self._warms)
