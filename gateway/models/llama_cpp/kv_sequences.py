"""The KV sequences of the batched decoder's one llama.cpp context (``gateway.models.llama_cpp.batch``):
what each holds, and the longest prefix a turn can start from.

A sequence's tokens ``t[0..n)`` sit at positions ``0..n-1`` of its cells. A turn keeps the longest
prefix of what it wants that its own sequence holds, or copies a longer one from another sequence's
cells (``llama_memory_seq_cp``: in a unified cache it costs no memory or compute) or restores it from
a saved state (:class:`~gateway.models.llama_cpp.state_cache.LlamaStateCache`, when it is 8+ tokens
longer); a sequence given back is saved there. Only the decoder's step thread touches the cells.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gateway.models.llama_cpp.holds import Evaluation
from gateway.models.llama_cpp.state_cache import LlamaStateCache, common_prefix


class KvSequence:
    """What one KV sequence holds: its tokens (at positions 0..n-1) and when it was last used."""

    def __init__(self, seq: int) -> None:
        self.seq = seq
        self.tokens: list[int] = []
        self.leased = False
        self.used = 0.0
        self.waiting = False  # a lease that evaluates between its samples (gather it into the step)


class KvSequences:
    """The ``count`` sequences of context ``ctx`` (``lib``: the ``llama_cpp`` module), ``all`` by id,
    and the saved states a turn may restore (``state_cache``)."""

    def __init__(self, lib: Any, ctx: Any, count: int, state_cache: LlamaStateCache) -> None:
        self._lib = lib
        self.ctx = ctx
        self.memory = lib.llama_get_memory(ctx)
        self.state_cache = state_cache
        self.all = [KvSequence(i) for i in range(count)]

    def resolve(self, evaluation: Evaluation) -> None:
        """Make the evaluation's sequence hold the longest available prefix of ``wanted[:-1]``; the
        rest is the evaluation's ``tokens`` to read (``kept``: how many it starts from)."""
        target = self.all[evaluation.seq]
        tokens = evaluation.wanted
        want = np.asarray(tokens[:-1], dtype=np.intc)
        kept = common_prefix(np.asarray(target.tokens, dtype=np.intc), want)
        self._lib.llama_memory_seq_rm(self.memory, target.seq, kept, -1)
        target.tokens = target.tokens[:kept]
        if evaluation.reuse_others:
            kept = self._copy_best(target, want, kept)
        evaluation.tokens, evaluation.kept, evaluation.resolved = list(tokens[kept:]), kept, True

    def _copy_best(self, target: KvSequence, want: np.ndarray, kept: int) -> int:
        """Copy a longer prefix from another sequence's cells or a saved state; the tokens held."""
        best, best_len = None, kept
        for other in self.all:
            if other is not target:
                length = common_prefix(np.asarray(other.tokens, dtype=np.intc), want)
                if length > best_len:
                    best, best_len = other, length
        if self.state_cache.best_prefix(want) > best_len + 8:
            restored = self.state_cache.restore_into(self.ctx, target.seq, want)
            if restored:
                target.tokens = [int(t) for t in want[:restored]]
                return restored
        if best is None:
            return kept
        self._lib.llama_memory_seq_rm(self.memory, target.seq, -1, -1)
        self._lib.llama_memory_seq_cp(self.memory, best.seq, target.seq, 0, best_len)
        target.tokens = list(best.tokens[:best_len])
        return best_len

    def save(self, sequence: KvSequence) -> None:
        """Save what a sequence no turn leases holds (a later turn may restore it)."""
        if sequence.tokens and not sequence.leased:
            self.state_cache.save_seq(self.ctx, sequence.seq, sequence.tokens)

    def clear(self, sequence: KvSequence) -> None:
        """Drop every cell of ``sequence``."""
        self._lib.llama_memory_seq_rm(self.memory, sequence.seq, -1, -1)
        sequence.tokens = []

    def forget(self, busy: set[int]) -> None:
        """Drop what sequences neither leased nor in ``busy`` hold, and every saved state."""
        for sequence in self.all:
            if not sequence.leased and sequence.seq not in busy:
                self.clear(sequence)
        self.state_cache.clear()

    def free_idle(self, busy: set[int]) -> bool:
        """Drop the cells of idle sequences (neither leased nor in ``busy``); True if any were dropped."""
        idle = [s for s in self.all if not s.leased and s.seq not in busy and s.tokens]
        for sequence in idle:
            self.clear(sequence)
        return bool(idle)
