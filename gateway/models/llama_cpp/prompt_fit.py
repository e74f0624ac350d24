"""Fit a chat prompt into a model's context window (``n_ctx`` tokens) by dropping the oldest turns.

Never dropped: the leading system message and the latest user turn (with any calls and tool outputs
after it). Turns go oldest first, a whole turn at a time (a user message and everything up to the
next one), so a tool output never loses the call it answers. If the kept messages alone are still
too long, the system message and then the latest user message are cut (their beginnings kept): the
request is answered from what fits rather than refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from gateway.models.base import ChatMessage

TokenCounter = Callable[[list[ChatMessage]], int]  # tokens of the rendered prompt


def fit_messages(messages: list[ChatMessage], count: TokenCounter, budget: int) -> list[ChatMessage]:
    """The messages to send, with ``count(result) <= budget`` whenever that is possible at all."""
    if not messages or count(messages) <= budget:
        return list(messages)
    head = messages[:1] if messages[0].role == "system" else []
    body = messages[len(head) :]
    last_user = max((i for i, m in enumerate(body) if m.role == "user"), default=0)
    older, latest = body[:last_user], body[last_user:]
    while older:
        cut = next((i for i, m in enumerate(older[1:], start=1) if m.role == "user"), len(older))
        older = older[cut:]
        if count(head + older + latest) <= budget:
            return head + older + latest
    kept = head + latest
    for index in range(len(kept)):
        if count(kept) <= budget:
            break
        kept[index] = _truncated(kept, index, count, budget)
    return kept


def _truncated(messages: list[ChatMessage], index: int, count: TokenCounter, budget: int) -> ChatMessage:
    """messages[index] with its content cut (at a word boundary when possible) to the longest head
    for which the whole prompt fits; empty content if nothing does."""
    message = messages[index]
    text = message.content

    def fits(length: int) -> bool:
        trial = list(messages)
        trial[index] = replace(message, content=text[:length])
        return count(trial) <= budget

    low, high = 0, len(text)
    while low < high:  # the largest length that fits
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    head = text[:low]
    space = head.rfind(" ")
    if 0 < space and low < len(text):
        head = head[:space]
    return replace(message, content=head)
