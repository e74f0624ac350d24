"""Saved llama.cpp KV states, so sessions that take turns on one engine do not re-read their history.

llama.cpp keeps the KV cache of the tokens it evaluated last, and ``Llama.generate`` reuses the
longest common prefix with the next prompt. With several sessions alternating, each turn would find
the other session's tokens there and evaluate its whole history again (prompt processing of the
1.5B model runs at ~45-90 tokens/s on 2 cores: a 300-token history costs 3-6 s). This cache keeps
the KV cells of a sequence after each generation (``llama_state_seq_get_data``: ~28 KiB per token
for Qwen2.5-1.5B), keyed by the tokens they hold, and puts back the entry sharing the longest prefix
with a new prompt when that beats what is live in the context. Least recently used entries go
first past ``capacity_bytes``; an entry whose tokens are a prefix of a newer one is dropped.

Not thread-safe by itself: used only by the step thread of ``gateway.models.llama_cpp.batch``.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any, Optional

import numpy as np


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

    def save_seq(self, ctx: Any, seq: int, tokens: list[int]) -> None:
        """Keep the KV cells of sequence ``seq`` of llama.cpp context ``ctx`` under the ``tokens``
        they hold (positions 0..len-1)."""
        import llama_cpp

        n = len(tokens)
        if self.capacity_bytes <= 0 or n == 0:
            return
        held_tokens = np.array(tokens, dtype=np.intc)
        size = llama_cpp.llama_state_seq_get_size(ctx, seq)
        if size <= 0 or size > self.capacity_bytes:
            return
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq)
        if written <= 0:
            return
        for key, (held, _) in list(self._entries.items()):
            if len(held) <= n and common_prefix(held, held_tokens) == len(held):
                del self._entries[key]  # a newer state of the same conversation covers it
        self._entries[held_tokens.tobytes()] = (held_tokens, bytes(memoryview(buffer)[:written]))
        self.saves += 1
        while self.size_bytes > self.capacity_bytes and self._entries:
            self._entries.popitem(last=False)

    def _best(self, prompt: np.ndarray) -> tuple[Optional[bytes], int]:
        best_key, best_len = None, 0
        for key, (tokens, _) in self._entries.items():
            length = common_prefix(tokens, prompt)
            if length > best_len:
                best_key, best_len = key, length
        return best_key, best_len

    def best_prefix(self, prompt: np.ndarray) -> int:
        """How many leading tokens of ``prompt`` the best saved state holds (0 if none)."""
        return self._best(prompt)[1]

    def restore_into(self, ctx: Any, seq: int, prompt: np.ndarray) -> int:
        """Load the saved state sharing the longest prefix with ``prompt`` into sequence ``seq``
        (whatever it held is dropped) and cut it to that prefix; the tokens now held (0 on failure).
        The caller evaluates at least one more token before sampling."""
        import llama_cpp

        best_key, best_len = self._best(prompt)
        if best_key is None:
            return 0
        _, state = self._entries[best_key]
        self._entries.move_to_end(best_key)
        memory = llama_cpp.llama_get_memory(ctx)
        llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if llama_cpp.llama_state_seq_set_data(ctx, buffer, len(state), seq) == 0:
            llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
            return 0
        llama_cpp.llama_memory_seq_rm(memory, seq, best_len, -1)
        self.restores += 1
        return best_len
