"""The call decision before a reply: answer in words, or call which tool, by the model's own odds.

A small model given tools in its prompt tends to call the first one for any question (Qwen2.5-Coder
1.5B with "You are a helpful assistant.", ``get_weather`` and ``book_table``: 4 of 12 questions
right). So whether to call and which tool are decided first, in a prompt of their own
(:func:`decision_messages`): the tools' names and descriptions, the caller's last message, and the
instruction to reply with a function's name or ``none``. The engine scores every option
(:func:`option_names`: ``none`` and each name, as the reply's tokens) by its log-probability and
:func:`decide` turns the scores into a :class:`Decision`: a call when the tools together hold at
least ``threshold`` of the probability, of the likeliest tool. The arguments are generated next,
under the chosen tool's schema grammar; a reply in words is generated from a prompt that lists no
tools, so no tool syntax or schema text can be recited.

``tool_choice`` keeps OpenAI's meaning (Realtime ``session.tool_choice``, Chat Completions
``tool_choice``): "auto" decides as above, "required" picks the likeliest tool (no ``none``), a
tool's name calls it without deciding, "none" never calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from gateway.models.base import ChatMessage, FunctionTool

WORDS = "none"  # the option that answers in words
# The share of probability the tools must hold for "auto" to call one (calibrated on the tuning
# questions of scripts/tool_questions.py, see scripts/bench_tools.py --calibrate).
CALL_THRESHOLD = 0.85

_ASK = (
    "You decide whether the user's message needs one of these functions. A function is needed only "
    "when the user asks for its action or its live data; a question of general knowledge, an "
    "explanation, advice, a story, a joke, a greeting or thanks is answered in words.\n"
    "{listing}\n"
    "Reply with the name of the function the message needs, or none if it is answered in words."
)


@dataclass
class Decision:
    """The choice made before a reply: ``tool`` (None: answer in words), ``call_probability`` (the
    tools' share of the options' probability, 0..1) and each option's log-probability."""

    tool: Optional[str]
    call_probability: float
    scores: dict[str, float] = field(default_factory=dict)


def option_names(tools: list[FunctionTool], choice: str) -> list[str]:
    """The replies scored for ``choice`` ("auto": ``none`` and every tool; "required": the tools)."""
    names = [t.name for t in tools]
    return names if choice == "required" else [WORDS, *names]


def decision_messages(messages: list[ChatMessage], tools: list[FunctionTool]) -> list[ChatMessage]:
    """The decision prompt: the tools (name: description) and the caller's last message. The
    session's instructions are left out (a plain "You are a helpful assistant." then decides as
    well as an app's own)."""
    listing = "\n".join(f"- {t.name}: {(t.description or t.name).strip()}" for t in tools)
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    return [ChatMessage("system", _ASK.format(listing=listing)), ChatMessage("user", last)]


def decide(scores: dict[str, float], threshold: float = CALL_THRESHOLD) -> Decision:
    """The :class:`Decision` from the options' log-probabilities (``scores``: option -> log p)."""
    top = max(scores.values())
    weights = {name: math.exp(score - top) for name, score in scores.items()}
    total = sum(weights.values())
    called = {name: w for name, w in weights.items() if name != WORDS}
    share = sum(called.values()) / total
    if not called or share < threshold:
        return Decision(None, share, scores)
    return Decision(max(called, key=lambda name: called[name]), share, scores)
