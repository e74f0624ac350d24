"""Saved llama.cpp KV states, so sessions that take turns on one engine do not re-read their history.

llama.cpp keeps the KV cache of the tokens it evaluated last, and ``Llama.generate`` reuses the
longest common prefix with the next prompt. With several sessions alternating, each turn would find
the other session's tokens there and evaluate its whole history again (prompt processing of the
1.5B model runs at ~45-90 tokens/s on 2 cores: a 300-token history costs 3-6 s). This cache keeps
the KV cells of sequence 0 after each generation (``llama_state_seq_get_data``: ~28 KiB per token
for Qwen2.5-1.5B), keyed by the tokens they hold, and puts back the entry sharing the longest prefix
with a new prompt when that beats what is live in the context. Least recently used entries go
first past ``capacity_bytes``; an entry whose tokens are a prefix of a newer one is dropped.

Not thread-safe by itself: used only by the engine while it holds its queue turn.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any

import numpy as np

_SEQ = 0  # the sequence id llama_cpp.Llama evaluates into


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    """Length of the common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.nonzero(a[:n] != b[:n])[0]
    return int(diff[0]) if diff.size else n


class LlamaStateCache:
    """KV states of recent prompts, at most ``capacity_bytes`` in all (0 disables saving)."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity_bytes = capacity_bytes
        self._entries: OrderedDict[bytes, tuple[np.ndarray, bytes]] = OrderedDict()
        self.saves = 0
        self.restores = 0

    @property
    def size_bytes(self) -> int:
        """Bytes of saved state held now."""
        return sum(len(state) for _, state in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every saved state."""
        self._entries.clear()

    def save(self, llm: Any) -> None:
        """Keep the live KV state of ``llm`` (a ``llama_cpp.Llama``) under the tokens it holds."""
        import llama_cpp

        n = int(llm.n_tokens)
        if self.capacity_bytes <= 0 or n == 0:
            return
        tokens = np.array(llm.input_ids[:n], dtype=np.intc)
        size = llama_cpp.llama_state_seq_get_size(llm.ctx, _SEQ)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(llm.ctx, buffer, size, _SEQ)
        if written <= 0 or written > self.capacity_bytes:
            return
        for key, (held, _) in list(self._entries.items()):
            if len(held) <= n and common_prefix(held, tokens) == len(held):
                del self._entries[key]  # a newer state of the same conversation covers it
        self._entries[tokens.tobytes()] = (tokens, bytes(memoryview(buffer)[:written]))
        self.saves += 1
        while self.size_bytes > self.capacity_bytes and self._entries:
            self._entries.popitem(last=False)

    def restore_best(self, llm: Any, prompt: np.ndarray, live_prefix: int, min_gain: int = 8) -> int:
        """Load the saved state sharing the longest prefix with ``prompt`` if it beats the
        ``live_prefix`` tokens already in the context by ``min_gain``; return the prefix now usable.

        After a restore the context holds exactly that prefix (``llm.n_tokens`` set to it) and the
        logits are stale: the caller evaluates at least one more token before sampling.
        """
        import llama_cpp

        best_key, best_len = None, live_prefix
        for key, (tokens, _) in self._entries.items():
            length = common_prefix(tokens, prompt)
            if length > best_len:
                best_key, best_len = key, length
        if best_key is None or best_len < live_prefix + min_gain:
            return live_prefix
        tokens, state = self._entries[best_key]
        self._entries.move_to_end(best_key)
        memory = llama_cpp.llama_get_memory(llm.ctx)
        llama_cpp.llama_memory_seq_rm(memory, _SEQ, -1, -1)
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data(llm.ctx, buffer, len(state), _SEQ) == 0:
            llm.n_tokens = 0
            return 0
        llama_cpp.llama_memory_seq_rm(memory, _SEQ, best_len, -1)
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = best_len
        llm._requires_eval = True
        self.restores += 1
        return best_len
