"""Which heavy model calls run in this process at this moment: the LLM's threads by load.

On a 2-core box llama.cpp decodes and reads prompts about twice as fast on 2 threads as on 1 while
the other core is free, and collapses when it is not (``scripts/bench_batch_decode.py``: a question's
prompt 357 ms on 2 threads / 672 ms on 1 with the other core idle, 1004 / 700 ms with it busy). So
the decision is per step, from what runs now: the stages mark their STT (``transcribe``), TTS (each
sentence's synthesis) and end-of-turn calls with :meth:`CoreUse.heavy`, the pool keeps
:attr:`CoreUse.calls` (calls connected), and the LLM's step thread asks :attr:`CoreUse.busy` before
each step. With two or more calls connected their media, VAD and gaps between model calls keep the
other core partly busy (``bench_talkers.py``: 4 callers answered ~10 % later with 2 threads), so
the cores are taken only for a lone call. Work of other processes (a second gateway on the same
machine) is not seen: give such a deployment ``llm_idle_threads`` 1.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

# A lone call's LLM steps wait from its reply's first piece of text until that piece's audio is
# made, at most this long, s. The synthesis is the last stage before the caller hears the reply, and
# beside the LLM's decode of the rest of the reply it took 2-3 times as long as alone (Piper, one
# first piece each: "And so my fellow Americans." 174 ms against 76, "Ten clubs." 107 against 38);
# the rest of the reply is not heard before that first piece has played (0.5-2 s). The hold starts
# when the LLM stage hands the piece on, not when TTS starts on it: the LLM stage asks for the next
# token first, and a step begun then ran beside the whole synthesis (0870, stop 50). Only for a TTS
# that computes in this process (a speech server's synthesis needs no core here). 0: no hold.
FIRST_AUDIO_HOLD_S = 0.4


class CoreUse:
    """A thread-safe count of the heavy model calls in progress."""

    def __init__(self) -> None:
        self._running = 0
        self._lock = threading.Lock()
        self.calls = 0  # calls connected to this process's pool (set by the pool; 0 without one)
        # (since, made, wanted) of each reply whose first piece of text awaits its audio
        self._first_audio: list[tuple[float, Callable[[], bool], Callable[[], bool]]] = []

    @property
    def busy(self) -> int:
        """How many heavy calls run now, and 1 more when two or more calls are connected (0: only
        the LLM wants the cores)."""
        return self._running + (1 if self.calls > 1 else 0)

    @contextmanager
    def heavy(self) -> Iterator[None]:
        """Count the enclosed model call while it runs."""
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1

    def await_first_audio(self, made: Callable[[], bool], wanted: Callable[[], bool]) -> None:
        """A reply's first piece of text went to TTS: :attr:`holds_llm` until ``made()`` (its audio
        is out) or not ``wanted()`` (its response cancelled or discarded), for at most
        :data:`FIRST_AUDIO_HOLD_S`. Any thread; both callables are asked from the LLM's step thread
        (under its lock: they must take no lock of the LLM's)."""
        now = time.monotonic()
        with self._lock:  # (expired ones go here too: an LLM that never asks holds_llm keeps none)
            self._first_audio = [e for e in self._first_audio if now - e[0] < FIRST_AUDIO_HOLD_S]
            self._first_audio.append((now, made, wanted))

    @property
    def holds_llm(self) -> bool:
        """True while a reply of the only call connected awaits its first audio
        (:meth:`await_first_audio`): the LLM takes no step meanwhile (with other calls connected
        their due work goes on)."""
        now = time.monotonic()
        with self._lock:
            entries = list(self._first_audio)
        ended = [e for e in entries if now - e[0] >= FIRST_AUDIO_HOLD_S or e[1]() or not e[2]()]
        if ended:
            with self._lock:
                self._first_audio = [e for e in self._first_audio if e not in ended]
        return len(entries) > len(ended) and self.calls <= 1

    def each_heavy(self, items: Iterable[T]) -> Iterator[T]:
        """``items`` (a model's generator, e.g. one sentence of audio per item), counting the
        computing of each item but not the time its consumer holds it."""
        iterator = iter(items)
        while True:
            with self.heavy():
                try:
                    item = next(iterator)
                except StopIteration:
                    return
            yield item


# One per process, like the models it counts.
CORE_USE = CoreUse()


@dataclass(frozen=True)
class LlamaThreads:
    """llama.cpp threads for one step of the batched decoder (``gateway.models.llama_cpp.batch``), as
    (decode threads, prompt threads): llama.cpp uses the second for a batch of several tokens.

    ``idle``: every step while :attr:`CoreUse.busy` is 0, i.e. at most one call is connected and no
    heavy model call runs (0: no such rule). Otherwise
    one sequence gets ``decode`` for its tokens and ``prompt`` for its prompt chunks; several get
    ``several`` (their callers' STT and TTS want the other cores)."""

    decode: int = 1
    prompt: int = 1
    several: int = 1
    idle: int = 0

    def for_step(self, sequences: int, busy: bool) -> tuple[int, int]:
        """The (decode, prompt) threads for a step over ``sequences`` sequences; ``busy``: a heavy
        model call runs now (:attr:`CoreUse.busy`)."""
        if self.idle and not busy:
            return self.idle, self.idle
        if sequences == 1:
            return self.decode, self.prompt
        return self.several, self.several
