"""Callers' handles on a :class:`~gateway.models.llama_cpp.batch.BatchDecoder`: a turn's
:class:`SequenceLease` on one KV sequence, a session's :class:`Warm` hold on a prompt read in the
background, and the :class:`Evaluation` each queues on the decoder's step thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

import numpy as np

from gateway.models.base import LanguageModelError

if TYPE_CHECKING:
    from gateway.models.llama_cpp.batch import BatchDecoder, _Sequence


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


class Warm:
    """One session's hold on a background warm (:meth:`BatchDecoder.warm`)."""

    def __init__(self, decoder: BatchDecoder, evaluation: Evaluation) -> None:
        self._decoder = decoder
        self._evaluation: Optional[Evaluation] = evaluation

    def cancel(self) -> None:
        """Let go (idempotent); the last holder's cancel stops the reading at the next step. The
        tokens read so far stay in the prefix sequence for whoever needs them next."""
        decoder, evaluation = self._decoder, self._evaluation
        if evaluation is None:
            return
        self._evaluation = None
        with decoder._holders:  # not the step thread's condition: a hang-up never waits for a step
            evaluation.holders -= 1
            if evaluation.holders <= 0:
                evaluation.abandoned = True  # dropped from the pending list before the next step

    @property
    def done(self) -> bool:
        """True once the tokens are read, or the warm stopped or failed."""
        return self._evaluation is None or self._evaluation.done.is_set() or self._evaluation.abandoned


class SequenceLease:
    """One turn's hold on a KV sequence of a :class:`BatchDecoder`; :meth:`release` when done."""

    def __init__(self, decoder: BatchDecoder, seq: _Sequence) -> None:
        self._decoder = decoder
        self._seq = seq
        self.seq_id = seq.seq
        self._first = True

    @property
    def tokens(self) -> list[int]:
        """The tokens the sequence holds now (a copy)."""
        with self._decoder._cond:
            return list(self._seq.tokens)

    def evaluate(self, tokens: list[int], should_stop: Callable[[], bool]) -> tuple[Optional[np.ndarray], int]:
        """Make the sequence hold ``tokens`` and return (logits after the last one, float32 shape
        (n_vocab,); how many tokens were reused rather than read). Logits are None when
        ``should_stop`` became True first (the read stops at the next step). Raises
        LanguageModelError when llama.cpp fails the step."""
        decoder = self._decoder
        evaluation = Evaluation(self.seq_id, list(tokens), reuse_others=self._first)
        self._first = False
        with decoder._cond:
            self._seq.waiting = False
            decoder._pending.append(evaluation)
            decoder._cond.notify_all()
        while not evaluation.done.wait(decoder._poll_s):
            if should_stop():
                with decoder._cond:
                    evaluation.abandoned = True
                    decoder._cond.notify_all()
                return None, evaluation.kept
        if evaluation.error:
            raise LanguageModelError(evaluation.error)
        return evaluation.logits, evaluation.kept

    def release(self) -> None:
        """Give the sequence back; its cells stay for a later turn (and are saved to the state cache)."""
        decoder = self._decoder
        with decoder._cond:
            for evaluation in decoder._pending:
                if evaluation.seq == self.seq_id:
                    evaluation.abandoned = True
            self._seq.waiting = False
            self._seq.leased = False
        seq = self._seq
        decoder._control(lambda: decoder._save(seq), wait=False)
