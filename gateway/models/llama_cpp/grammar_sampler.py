"""Pick tokens that a GBNF grammar allows, quickly: check the likeliest candidates first.

llama.cpp's grammar sampler tests every vocabulary entry against the grammar at each step; for a
151k-token vocabulary (Qwen2.5) that costs ~0.2-0.3 s per token on this CPU. Almost always one of
the few likeliest tokens is allowed, so :meth:`GrammarSampler.pick` applies the grammar to the top
``top_k`` candidates only (a llama_token_data_array of that size) and falls back to the whole
vocabulary when none of them is allowed: same result as sampling under the grammar, at the speed
of plain decoding. The grammar state advances with :meth:`accept`.

Uses the llama.cpp C API through ``llama_cpp`` (``llama_sampler_init_grammar``,
``llama_sampler_apply``, ``llama_sampler_accept``); one per generation, used by its thread only.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional

import numpy as np


class GrammarSampler:
    """Grammar-constrained choice of the next token for ``llm`` (a ``llama_cpp.Llama``: its vocabulary).

    ``banned``: tokens never picked, whatever the grammar allows (a call's control tokens:
    ``ChatFormat.control_tokens``)."""

    def __init__(self, llm: Any, grammar: Any, top_k: int = 40, banned: Optional[np.ndarray] = None) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._banned = banned if banned is not None and len(banned) else None
        self._n_vocab = int(llm.n_vocab())
        self._top_k = min(top_k, self._n_vocab)
        vocab = llm._model.vocab
        self._sampler = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self._sampler:
            raise ValueError("llama.cpp could not parse the grammar")

    def close(self) -> None:
        """Free the C sampler."""
        if self._sampler:
            self._lib.llama_sampler_free(self._sampler)
            self._sampler = None

    def _allowed(self, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        """``logits`` of ``ids`` with the grammar applied (-inf where not allowed)."""
        lib = self._lib
        data = (lib.llama_token_data * len(ids))()
        for i, (token, logit) in enumerate(zip(ids.tolist(), logits.tolist(), strict=True)):
            data[i].id, data[i].logit, data[i].p = token, logit, 0.0
        array = lib.llama_token_data_array(data=data, size=len(ids), selected=-1, sorted=False)
        lib.llama_sampler_apply(self._sampler, ctypes.byref(array))
        return np.array([data[i].logit for i in range(len(ids))], dtype=np.float64)

    def pick(self, logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
        """The next token from ``logits`` (float32, shape (n_vocab,)): the likeliest allowed one at
        temperature 0, else one sampled from the allowed top candidates."""
        if self._banned is not None:
            logits = logits.copy()
            logits[self._banned] = -np.inf
        ids = np.argpartition(logits, -self._top_k)[-self._top_k :]
        allowed = self._allowed(ids, logits[ids])
        if not np.isfinite(allowed).any():  # none of the likeliest fits: check the whole vocabulary
            ids = np.arange(self._n_vocab)
            allowed = self._allowed(ids, np.asarray(logits, dtype=np.float64))
        finite = np.isfinite(allowed)
        if not finite.any():
            raise ValueError("the grammar allows no token here")
        if temperature <= 0:
            return int(ids[int(np.argmax(np.where(finite, allowed, -np.inf)))])
        scaled = np.where(finite, allowed / temperature, -np.inf)
        weights = np.exp(scaled - scaled[finite].max())
        return int(rng.choice(ids, p=weights / weights.sum()))

    def accept(self, token: int) -> None:
        """Advance the grammar past ``token``."""
        self._lib.llama_sampler_accept(self._sampler, token)


def sample_token(
    logits: np.ndarray,
    temperature: float,
    rng: np.random.Generator,
    top_p: float = 0.95,
    top_k: int = 40,
    min_p: float = 0.05,
) -> int:
    """The next token from ``logits`` (shape (n_vocab,)): argmax at temperature 0, else sampled
    after top-k, top-p (nucleus) and min-p filtering (llama.cpp's default chain order)."""
    if temperature <= 0:
        return int(np.argmax(logits))
    k = min(top_k, logits.shape[0])
    ids = np.argpartition(logits, -k)[-k:]
    ids = ids[np.argsort(-logits[ids], kind="stable")]
    scaled = logits[ids].astype(np.float64) / temperature
    probs = np.exp(scaled - scaled[0])
    probs /= probs.sum()
    keep = int(np.searchsorted(np.cumsum(probs), top_p) + 1)
    keep = max(1, min(keep, k, int((probs >= min_p * probs[0]).sum())))
    ids, probs = ids[:keep], probs[:keep] / probs[:keep].sum()
    return int(rng.choice(ids, p=probs))
