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

After a tool's output (``function_call_output``) the same step decides again, on the caller's
request and the calls made for it so far with their outputs (:func:`chain_since_request`): another
call (a chained call: the output names what the next one needs) or the answer in words. A chain is
bounded: at most :data:`MAX_CHAIN_CALLS` calls answer one request, and a call that repeats one the
chain already made (same name, the earlier arguments unchanged: :func:`repeats`) is answered in
words instead (Qwen2.5-Coder-1.5B, asked again after ``get_weather(Paris)``'s output, wrote the
call once more with a unit added).

``tool_choice`` keeps OpenAI's meaning (Realtime ``session.tool_choice``, Chat Completions
``tool_choice``): "auto" decides as above, "required" picks the likeliest tool (no ``none``), a
tool's name calls it without deciding, "none" never calls.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Optional

from gateway.models.base import ChatMessage, FunctionTool, ToolCall

WORDS = "none"  # the option that answers in words
# The share of probability the tools must hold for "auto" to call one (calibrated on the tuning
# questions of scripts/tool_questions.py, see scripts/bench_tools.py --calibrate).
CALL_THRESHOLD = 0.85
MAX_CHAIN_CALLS = 4  # calls made for one request of the caller before "auto" answers in words
_OUTPUT_CHARS = 600  # of each tool output shown to the decision (a long output is cut)

_ASK = (
    "You decide whether the user's message needs one of these functions. A function is needed only "
    "when the user asks for its action or its live data; a question of general knowledge, an "
    "explanation, advice, a story, a joke, a greeting or thanks is answered in words.\n"
    "{listing}\n"
    "Reply with the name of the function the message needs, or none if it is answered in words."
)

# After the calls made for a message (in its user turn, so the system turn stays the same).
_AGAIN = "\nName a function only if the message still needs another call; none when these results answer it."


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


def chain_since_request(messages: list[ChatMessage]) -> list[tuple[ToolCall, Optional[str]]]:
    """The calls made since the caller's last message, in order, each with its output (None: no
    output given yet)."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1) + 1
    outputs = {m.tool_call_id: m.content for m in messages[start:] if m.role == "tool"}
    return [(c, outputs.get(c.call_id)) for m in messages[start:] for c in m.tool_calls]


def repeats(call: ToolCall, chain: list[tuple[ToolCall, Optional[str]]]) -> bool:
    """True when ``call`` repeats a call in ``chain``: the same name, and arguments that hold each
    of the earlier call's with the same JSON value (an optional argument added, such as a unit,
    asks the same again)."""
    new = _json(call.arguments)
    return any(
        c.name == call.name and all(key in new and new[key] == value for key, value in _json(c.arguments).items())
        for c, _ in chain
    )


def _json(text: str) -> dict:
    """The arguments object of ``text`` ({} when it is not one)."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def decision_messages(messages: list[ChatMessage], tools: list[FunctionTool]) -> list[ChatMessage]:
    """The decision prompt: the tools (name: description) in the system turn, and in the user turn
    the caller's last message, followed by the calls made for it so far and their outputs. The
    system turn is the same for every turn of a session (read once, ``prepare``)."""
    listing = "\n".join(f"- {t.name}: {(t.description or t.name).strip()}" for t in tools)
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    done = [
        f"- {c.name}({c.arguments}) returned: {(output or '')[:_OUTPUT_CHARS]}"
        for c, output in chain_since_request(messages)
    ]
    if done:
        last = f"{last}\n\nFunctions already called for this message:\n" + "\n".join(done) + _AGAIN
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
