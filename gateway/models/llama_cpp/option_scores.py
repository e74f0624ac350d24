"""Log-probabilities of a few fixed replies after a prompt, read from the model's logits.

Each option is tokenized (no BOS, no special tokens) and scored as the sum of its tokens' log-softmax
values, each after the prompt and the option's tokens before it. Options share their leading
tokens (``get_weather``, ``get_time``), so the positions are visited as a trie: one evaluation per
distinct prefix, each on the turn's own KV sequence (the batched decoder keeps the longest prefix
held, so a branch costs one token read). A grammar that allows exactly these options would choose
the likeliest of them; scoring all of them also gives each one's probability.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import numpy as np

Evaluate = Callable[[list[int]], Optional[np.ndarray]]  # tokens -> logits after the last (None: stopped)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Natural-log probabilities of ``logits`` (shape (n_vocab,)), as float64."""
    shifted = logits.astype(np.float64) - float(np.max(logits))
    return shifted - float(np.log(np.exp(shifted).sum()))


def token_logprob(logits: np.ndarray, token: int) -> float:
    """The natural-log probability of ``token`` under ``logits`` (shape (n_vocab,))."""
    return float(log_softmax(logits)[token])


def score_options(
    evaluate: Evaluate, prompt: list[int], first: np.ndarray, options: dict[str, list[int]]
) -> Optional[dict[str, float]]:
    """``{option: log p(option's tokens | prompt)}``; ``first``: the logits after ``prompt``.
    None when ``evaluate`` was stopped."""
    cache: dict[tuple[int, ...], np.ndarray] = {(): log_softmax(first)}
    scores: dict[str, float] = {}
    for name, tokens in options.items():
        total = 0.0
        for i, token in enumerate(tokens):
            head = tuple(tokens[:i])
            if head not in cache:
                logits = evaluate(prompt + list(head))
                if logits is None:
                    return None
                cache[head] = log_softmax(logits)
            total += float(cache[head][token])
        scores[name] = total
    return scores
