"""Continuous batching on one llama.cpp context: several conversations advance in one forward pass.

On a CPU, decoding is bound by reading the weights, so one ``llama_decode`` over N sequences costs far
less than N single ones (a slow 2-core box, Qwen2.5-1.5B Q4_K_M, 2 threads: 101 / 144 / 227 ms per step
for 1 / 2 / 4 sequences; ``scripts/bench_batch_decode.py``). A :class:`BatchDecoder` owns one context
with ``sequences + prefixes`` KV sequences in a unified cache (``kv_unified``: a prefix copied with
``llama_memory_seq_cp`` costs no memory or compute) and one thread that runs the steps. Callers (LLM
stage threads) each hold a :class:`SequenceLease` and call :meth:`SequenceLease.evaluate` with the
whole token list their sequence should hold; the decoder keeps the longest prefix it already has (its
own cells, another sequence's, a prefix warmed by :meth:`BatchDecoder.warm` or a saved state from
:class:`~gateway.models.llama_cpp.state_cache.LlamaStateCache`; ``gateway.models.llama_cpp.kv_sequences``),
evaluates the rest and returns the logits of the last position. Sampling stays in the caller's thread.

One step: the pending evaluations of one class by deadline (``gateway.models.llama_cpp.schedule``:
due work, else replies ahead of their playout and session warms, else read-aheads; replies far
ahead wait) contribute their next tokens (one for a decoding turn, up to ``chunk`` prompt tokens
for one being read, ``shared_chunk`` beside decodes, earliest deadline first); new turns join at
the next step (continuous batching). An evaluation's ``due`` comes from its caller
(:meth:`SequenceLease.evaluate`: a reply's pace); a warm a turn waits for takes that turn's.
Threads by load, per step (:class:`~gateway.models.compute.core_use.LlamaThreads`): ``idle`` threads (2) for
a lone call while no STT, TTS or end-of-turn call runs (``CORE_USE``), else 1 (2 collapse on a busy core),
and while that lone call's other model call runs a prompt is read ``schedule.BUSY_CHUNK`` tokens a
step; no step at all from its reply's first piece of text to that piece's audio (``CoreUse.holds_llm``).
A caller whose ``should_stop`` turns True stops waiting at once (polled every ``poll_s``); the step
in flight still completes, and its tokens stay valid KV for a later turn.

Step times: pure decode steps (one token per sequence) are timed by size into
:attr:`BatchDecoder.step_times` (seeded by :meth:`BatchDecoder.measure_steps`;
``gateway.models.compute.decode_capacity``). Positions: a sequence's tokens ``t[0..n)`` sit at
``0..n-1``. A step with no free KV cell frees idle sequences, then fails its evaluations
(:class:`~gateway.models.base.LanguageModelError`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from gateway.models.base import LanguageModelError
from gateway.models.compute.core_use import CORE_USE, LlamaThreads
from gateway.models.compute.decode_capacity import StepTimes
from gateway.models.llama_cpp.holds import Evaluation, SequenceLease, Warm
from gateway.models.llama_cpp.kv_sequences import KvSequence, KvSequences
from gateway.models.llama_cpp.schedule import BUSY_CHUNK, SPECULATIVE_CHUNK, StepPlan, plan_step
from gateway.models.llama_cpp.state_cache import LlamaStateCache, common_prefix

log = logging.getLogger(__name__)

# Longer instructions and tools are not read at call start (a warm runs in every step until it is
# done); a prompt read ahead at a caller's pause is bounded by the context only, and gives way to
# turns when the KV cache is full.
MAX_WARM_TOKENS = 1024


class BatchDecoder:
    """One llama.cpp context shared by up to ``sequences`` concurrent turns, stepped by one thread.

    ``model`` is a ``llama_cpp.Llama`` (its weights and vocabulary are used; its own context is not).
    ``n_ctx`` is the total of KV cells across all sequences (a conversation is fitted to less).
    Its leases and warms reach it through :class:`~gateway.models.llama_cpp.holds.Steps`.
    """

    def __init__(
        self,
        model: Any,
        n_ctx: int,
        sequences: int = 4,
        prefixes: int = 2,
        threads: Optional[LlamaThreads] = None,
        chunk: int = 64,
        shared_chunk: int = 16,
        state_cache: Optional[LlamaStateCache] = None,
        poll_s: float = 0.02,
        gather_s: float = 0.01,
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.model = model
        self.n_vocab = int(model.n_vocab())
        self.sequences = sequences
        self.threads = threads or LlamaThreads()
        self.chunk, self.shared_chunk = chunk, min(shared_chunk, chunk)
        # (not ``or``: an empty cache has len 0, and would be swapped for a disabled one)
        self.state_cache = state_cache if state_cache is not None else LlamaStateCache(0)
        self.poll_s, self._gather_s = poll_s, gather_s
        self._capacity = chunk + sequences + prefixes
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = self._capacity
        params.n_seq_max = sequences + prefixes
        params.kv_unified = True
        self._threads_now = self.threads.for_step(1, busy=True)
        params.n_threads, params.n_threads_batch = self._threads_now
        params.no_perf = True
        self.ctx = llama_cpp.llama_init_from_model(model._model.model, params)
        if not self.ctx:
            raise LanguageModelError("llama.cpp could not create the batched context")
        self.n_ctx = int(llama_cpp.llama_n_ctx(self.ctx))
        self._kv = KvSequences(llama_cpp, self.ctx, sequences + prefixes, self.state_cache)
        self._memory, self._seqs = self._kv.memory, self._kv.all
        self._batch = llama_cpp.llama_batch_init(self._capacity, 0, 1)
        self._prefix_ids = list(range(sequences, sequences + prefixes))
        self._pending: list[Evaluation] = []
        self._controls: list[Callable[[], None]] = []
        self._cond = threading.Condition()
        self._holders = threading.Lock()  # warms' holders (let_go takes no step-thread lock)
        self.steps = 0
        self.step_sizes: list[int] = []  # sequences per step, the last 1000 (for tests and benches)
        self.step_times = StepTimes()  # pure decode steps by size (admission's talking capacity)
        # Seconds in llama_decode so far, as thread time of the busy setting (_threads_over_busy):
        # ``busy_s`` for work a turn waits for (the cost of a call admission learns), ``yielding_s``
        # for speculative steps (read-aheads, held preemptive replies), which give way to any turn;
        # ``busy_wall_s``: busy_s's steps as wall time (the share of the time the thread computes).
        self.busy_s = 0.0
        self.busy_wall_s = 0.0
        self.yielding_s = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="llama-batch", daemon=True)
        self._thread.start()

    # ----- callers -----

    def lease(self) -> SequenceLease:
        """A free sequence for one turn (the caller's engine queue bounds how many are out at once),
        the least recently used one. Raises LanguageModelError if none is free."""
        with self._cond:
            free = [s for s in self._seqs[: self.sequences] if not s.leased]
            if not free:
                raise LanguageModelError("no free llama.cpp sequence (more turns than sequences)")
            chosen = min(free, key=lambda s: s.used)
            chosen.leased, chosen.used = True, time.monotonic()
            return SequenceLease(self, chosen.seq)

    def warm(self, tokens: list[int], limit: int = MAX_WARM_TOKENS, speculative: bool = False) -> Optional[Warm]:
        """Read ``tokens`` (a session's instructions and tools, or a whole prompt read ahead) into a
        prefix sequence in the background, unless some sequence already holds them or they are over
        ``limit``; later turns copy its cells. Turns' own prompts are read first in each step.
        ``speculative``: for a turn that may not come (a read-ahead at a pause): read only in steps
        where no turn reads or generates (16 prompt tokens beside a step of decodes make it several
        times as long on one thread, and every caller hearing a reply waits for it), until a turn
        waits for it; a warm that finds no free prefix sequence takes one from it.

        Returns the session's hold on it (sessions asking for the same tokens share one warm; one
        nobody holds stops at the next step), or None when nothing is read for it."""
        if len(tokens) < 2 or len(tokens) > limit:
            return None
        want = np.asarray(tokens, dtype=np.intc)
        with self._cond:
            held = (common_prefix(np.asarray(s.tokens, dtype=np.intc), want) for s in self._seqs)
            if any(length >= len(tokens) - 1 for length in held):
                return None
            for evaluation in self._pending:
                if evaluation.warm and evaluation.wanted == tokens:
                    with self._holders:  # (one let go of but not yet dropped is taken up again)
                        evaluation.holders, evaluation.abandoned = evaluation.holders + 1, False
                    evaluation.speculative = evaluation.speculative and speculative
                    return Warm(self, evaluation)
            busy = {e.seq for e in self._pending if not e.abandoned}
            free = [self._seqs[i] for i in self._prefix_ids if i not in busy]
            if not free and not speculative:
                free = self._drop_a_read_ahead()
            if not free:
                return None
            target = min(free, key=lambda s: s.used)
            target.used = time.monotonic()
            evaluation = Evaluation(
                target.seq, list(tokens), reuse_others=True, warm=True, holders=1, speculative=speculative
            )
            self._pending.append(evaluation)
            self._cond.notify_all()
            return Warm(self, evaluation)

    # ----- the holds' face (Steps) -----

    def submit(self, evaluation: Evaluation) -> None:
        """Queue ``evaluation`` for the next step; its sequence stops waiting between two samples."""
        with self._cond:
            self._seqs[evaluation.seq].waiting = False
            self._pending.append(evaluation)
            self._cond.notify_all()

    def abandon(self, evaluation: Evaluation) -> None:
        """Read no more of ``evaluation`` (its caller stopped waiting); the step in flight completes."""
        with self._cond:
            evaluation.abandoned = True
            self._cond.notify_all()

    def let_go(self, evaluation: Evaluation) -> None:
        """One holder of a warm lets go (no step-thread lock: a hang-up never waits for a step)."""
        with self._holders:
            evaluation.holders -= 1
            if evaluation.holders <= 0:
                evaluation.abandoned = True

    def held(self, seq: int) -> list[int]:
        """The tokens sequence ``seq`` holds now (a copy)."""
        with self._cond:
            return list(self._seqs[seq].tokens)

    def give_back(self, seq: int) -> None:
        """End the lease on ``seq``: its reads stop, its cells stay (and are saved) for a later turn."""
        sequence = self._seqs[seq]
        with self._cond:
            for evaluation in self._pending:
                if evaluation.seq == seq:
                    evaluation.abandoned = True
            sequence.waiting = sequence.leased = False
        self._control(lambda: self._kv.save(sequence), wait=False)

    def _drop_a_read_ahead(self) -> list[KvSequence]:
        """Let go of one pending speculative warm (its holder sees it done, unread) and return its
        prefix sequence, for a warm that is wanted for sure; [] when there is none."""
        for evaluation in self._pending:
            if evaluation.warm and evaluation.speculative and not evaluation.abandoned:
                evaluation.abandoned = True
                self._pending.remove(evaluation)
                evaluation.done.set()
                return [self._seqs[evaluation.seq]]
        return []

    def measure_steps(self, repeats: int = 3) -> dict[int, float]:
        """Time ``repeats`` decode steps of batch sizes 1, 2, 4 and ``sequences`` (those up to
        ``sequences``) into :attr:`step_times` (the start-up seed; real turns' steps update it).
        Each step puts one token after what each sequence holds, and the cells are dropped again
        after, so the sequences keep their tokens. Runs on the step thread between two steps (~12
        steps: about 2 s for the 1.5B model on a slow 2-core box; call it before callers come).
        Returns :meth:`StepTimes.typical_ms`. Raises LanguageModelError when llama.cpp fails a step."""
        failed: list[int] = []

        def probe() -> None:
            for size in sorted({min(size, self.sequences) for size in (1, 2, 4, self.sequences)}):
                seqs = self._seqs[:size]
                for r in range(repeats):
                    batch = self._batch
                    for i, seq in enumerate(seqs):
                        batch.token[i], batch.pos[i] = 0, len(seq.tokens) + r
                        batch.n_seq_id[i], batch.seq_id[i][0], batch.logits[i] = 1, seq.seq, 1
                    batch.n_tokens = size
                    self._use_threads(size, busy=True)  # capacity is judged on the busy setting
                    started = time.perf_counter()
                    status = self._lib.llama_decode(self.ctx, batch)
                    if status != 0:
                        failed.append(status)
                        break
                    self.step_times.record(size, time.perf_counter() - started)
                for seq in seqs:
                    self._lib.llama_memory_seq_rm(self._memory, seq.seq, len(seq.tokens), -1)
                if failed:
                    return

        self._control(probe)
        if failed:
            raise LanguageModelError(f"llama_decode failed ({failed[0]}) while timing decode steps")
        return self.step_times.typical_ms()

    def forget(self) -> None:
        """Drop what idle sequences hold and every saved state (tests of the state cache)."""
        self._control(lambda: self._kv.forget({e.seq for e in self._pending}))

    def close(self) -> None:
        """Stop the step thread and free the context."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(5)
        self._lib.llama_batch_free(self._batch)
        self._lib.llama_free(self.ctx)

    def _control(self, action: Callable[[], None], wait: bool = True) -> None:
        """Run ``action`` on the step thread between two steps (only that thread touches the context)."""
        done = threading.Event()

        def run() -> None:
            try:
                action()
            finally:
                done.set()

        with self._cond:
            self._controls.append(run)
            self._cond.notify_all()
        if wait:
            done.wait()

    # ----- on the step thread, under the condition -----

    def _warming_for(self, evaluation: Evaluation) -> bool:
        """True while a warm being read will cover 8+ more tokens of this new turn than any sequence
        not being warmed holds: the turn waits rather than read them a second time beside it. A
        speculative warm a turn waits for is wanted now: it is read beside decodes from then on."""
        if not evaluation.reuse_others:
            return False
        want = np.asarray(evaluation.wanted[:-1], dtype=np.intc)
        # Only warms being read: two unresolved ones would wait on each other.
        warms = [w for w in self._pending if w is not evaluation and w.warm and w.resolved]
        warming = {w.seq for w in warms}
        held = max(common_prefix(np.asarray(s.tokens, dtype=np.intc), want) for s in self._seqs if s.seq not in warming)
        covering = [w for w in warms if common_prefix(np.asarray(w.wanted, dtype=np.intc), want) > held + 8]
        if not evaluation.speculative:
            for warm in covering:  # read from now on as the turn's own prompt, by its deadline
                warm.speculative = False
                warm.due = min(warm.due, evaluation.due)
        return bool(covering)

    # ----- the step thread -----

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._controls and not self._live_pending():
                    self._cond.wait()
                if self._closed:
                    return
                while self._controls:
                    self._controls.pop(0)()
                self._gather()
                for evaluation in self._live_pending():
                    if not evaluation.resolved and not self._warming_for(evaluation):
                        self._kv.resolve(evaluation)
                plan = self._plan()
                if not plan.items:  # reads held back while a turn samples, or replies paused
                    self._cond.wait(self._idle_wait(plan))
            if plan.items:
                self._step(plan.items, yielding=plan.yielding)

    def _live_pending(self) -> list[Evaluation]:
        self._pending = [e for e in self._pending if not e.abandoned]
        return self._pending

    def _gather(self) -> None:
        """Wait (``gather_s`` at most) for leased sequences between two samples to send their next token."""
        deadline = time.monotonic() + self._gather_s
        while True:
            pending = {e.seq for e in self._pending}
            late = [s for s in self._seqs if s.waiting and s.seq not in pending]
            remaining = deadline - time.monotonic()
            if not late or remaining <= 0:
                return
            self._cond.wait(remaining)

    def _plan(self) -> StepPlan:
        """This step's (evaluation, how many of its tokens), by deadline (``schedule.plan_step``);
        none while a lone call's reply awaits its first audio (``CoreUse.holds_llm``)."""
        if CORE_USE.holds_llm:
            return StepPlan(wake_at=time.monotonic())
        return plan_step(
            self._live_pending(),
            time.monotonic(),
            capacity=self._capacity,
            chunk=self.chunk,
            shared_chunk=self.shared_chunk,
            turns_between_samples=any(s.waiting for s in self._seqs),
            leased=lambda seq: self._seqs[seq].leased,
            speculative_chunk=SPECULATIVE_CHUNK if CORE_USE.calls > 1 else None,
            busy_chunk=BUSY_CHUNK if self._waiting_for_cores() else None,
        )

    def _waiting_for_cores(self) -> bool:
        """True while a lone call's heavy model call keeps this decoder off the ``idle`` threads
        it would otherwise step on (``schedule.BUSY_CHUNK``)."""
        return bool(self.threads.idle) and CORE_USE.calls <= 1 and CORE_USE.busy > 0

    def _idle_wait(self, plan: StepPlan) -> float:
        """How long the step thread waits for news when nothing can be stepped: a turn's next token
        (``gather_s``), else until the earliest paused reply may go on (a submit wakes it sooner)."""
        if any(s.waiting for s in self._seqs) or plan.wake_at is None:
            return self._gather_s or 0.005
        return min(1.0, max(0.005, plan.wake_at - time.monotonic()))

    def _use_threads(self, size: int, busy: bool) -> bool:
        """Set the threads for a step of ``size`` sequences; True when they are the busy setting."""
        threads = self.threads.for_step(size, busy)
        if threads != self._threads_now:
            self._lib.llama_set_n_threads(self.ctx, *threads)
            self._threads_now = threads
        return threads == self.threads.for_step(size, busy=True)

    def _threads_over_busy(self, size: int, tokens: int) -> float:
        """A step's threads over the busy setting's (``n_threads`` for one token, else
        ``n_threads_batch``): a lone call's steps on ``llm_idle_threads`` count that many times in
        ``busy_s``, the thread time a talker beside others takes (as wall time, 2 threads: half)."""
        index = 0 if tokens == 1 else 1
        return self._threads_now[index] / max(1, self.threads.for_step(size, busy=True)[index])

    def _step(self, plan: list[tuple[Evaluation, int]], yielding: bool = False) -> None:
        lib, batch = self._lib, self._batch
        timed = self._use_threads(len(plan), busy=CORE_USE.busy > 0)
        n, outputs = 0, []
        for evaluation, take in plan:
            seq = self._seqs[evaluation.seq]
            last = take == len(evaluation.tokens)
            for i, token in enumerate(evaluation.tokens[:take]):
                batch.token[n], batch.pos[n] = token, len(seq.tokens) + i
                batch.n_seq_id[n], batch.seq_id[n][0] = 1, seq.seq
                batch.logits[n] = 1 if last and i == take - 1 else 0
                n += 1
            if last:
                outputs.append((evaluation, n - 1))
        batch.n_tokens = n
        started = time.perf_counter()
        status = lib.llama_decode(self.ctx, batch)
        took = time.perf_counter() - started
        if yielding:  # only this thread writes either
            self.yielding_s += took * self._threads_over_busy(len(plan), n)
        else:
            self.busy_s += took * self._threads_over_busy(len(plan), n)
            self.busy_wall_s += took
        if status == 0 and n == len(plan) and timed:  # a pure decode step (one token per sequence)
            self.step_times.record(n, took)
        with self._cond:
            if status == 1 and self._kv.free_idle({e.seq for e in self._pending}):
                status = lib.llama_decode(self.ctx, batch)
            if status == 1 and self._drop_warms():
                return  # the turns' tokens are planned again, without the background reads
            self.steps += 1
            self.step_sizes = [*self.step_sizes[-999:], len(plan)]
            if status != 0:
                self._fail(plan, f"llama_decode failed ({status}: the KV cache is full or the batch invalid)")
                return
            for evaluation, take in plan:
                seq = self._seqs[evaluation.seq]
                seq.tokens.extend(evaluation.tokens[:take])
                seq.used = time.monotonic()
                evaluation.tokens = evaluation.tokens[take:]
            for evaluation, index in outputs:
                pointer = lib.llama_get_logits_ith(self.ctx, index)
                evaluation.logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()
                self._finish(evaluation)
            self._cond.notify_all()

    def _finish(self, evaluation: Evaluation) -> None:
        if evaluation in self._pending:
            self._pending.remove(evaluation)
        seq = self._seqs[evaluation.seq]
        seq.waiting = seq.leased and not evaluation.abandoned  # its next token is gathered into the step
        evaluation.done.set()

    def _fail(self, plan: list[tuple[Evaluation, int]], reason: str) -> None:
        for evaluation, _ in plan:
            seq = self._seqs[evaluation.seq]
            self._lib.llama_memory_seq_rm(self._memory, seq.seq, len(seq.tokens), -1)
            evaluation.error = reason
            self._finish(evaluation)
        self._cond.notify_all()

    def _drop_warms(self) -> bool:
        """The KV cache is full: background reads give way to turns (their cells are dropped)."""
        warms = [e for e in self._pending if e.warm]
        for evaluation in warms:
            evaluation.abandoned = True
            self._kv.clear(self._seqs[evaluation.seq])
            self._finish(evaluation)
        return bool(warms)
