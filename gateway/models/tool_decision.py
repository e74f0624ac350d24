"""The call decision before a reply: answer in words, or call which tool, by the model's own odds.

A small model given tools in its prompt tends to call the first one for any question (Qwen2.5-Coder
1.5B with "You are a helpful assistant.", ``get_weather`` and ``book_table``: 4 of 12 questions
right). So whether to call and which tool are decided first, in a prompt of their own
(:func:`decision_messages`): worked :data:`EXAMPLES` with made-up functions, the tools' names and
descriptions with the words option listed like one (``answer``: :data:`WORDS_LISTING`), the caller's
last message, and the instruction to reply with a function's name or ``answer``. The engine scores
every option (:func:`option_names`: ``answer`` and each name, as the reply's tokens) by its log-probability and
:func:`decide` turns the scores into a :class:`Decision`: a call when the tools together hold at
least ``threshold`` of the probability, of the likeliest tool. The arguments are generated next,
under the chosen tool's schema grammar; a reply in words is generated from a prompt that lists no
tools, so no tool syntax or schema text can be recited.

A call so chosen under "auto" is checked once its arguments are generated: when every argument
value holds a token the model gave under :data:`INVENTED_LOGPROB` (:func:`invented`), the message
held nothing to fill them and the model made them up (a knowledge question near a tool's subject:
"How long is a flight from London to New York?" -> ``check_flight("G678")``), so the turn is
answered in words.
With :data:`HEARD_CHECK` so is a call with a string value whose words were said nowhere in the
conversation, derived values aside (:mod:`gateway.models.heard_values`): the model can be sure of a
value nobody gave ("How much does a taxi ride usually cost per mile?" -> ``order_taxi("New York")``).

After a tool's output (``function_call_output``) the step decides again (with the earlier prompt:
no examples, ``none``, :data:`CHAIN_CALL_THRESHOLD`), on the caller's
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

WORDS = "answer"  # the option that answers in words, listed like a function (:data:`WORDS_LISTING`)
WORDS_FALLBACK = "answer_in_words"  # its name when an app's own tool is named ``answer``
WORDS_LISTING = (
    "answer in words from general knowledge: facts, history, science, definitions, how-to, advice, "
    "stories, jokes, greetings and thanks"
)
# The share of probability the tools must hold for "auto" to call one (calibrated on the tuning
# questions of scripts/tool_questions.py, see scripts/bench_tools.py --calibrate).
CALL_THRESHOLD = 0.7
# A decision after a tool's output (a chained call) keeps the first round's prompt, option and
# threshold: with the examples and the listed "answer", Qwen2.5-Coder-1.5B called get_weather again
# after Paris's output (0.87-0.94 under five wordings tried; tests/models/test_tool_decision.py).
CHAIN_WORDS = "none"
CHAIN_CALL_THRESHOLD = 0.85
MAX_CHAIN_CALLS = 4  # calls made for one request of the caller before "auto" answers in words
# The share of a request's compute budget the decision may use: one cut by it (a loaded box) is
# answered in words under "auto", with the rest of the budget, and fails the request under
# "required" (no call can be chosen): never an empty reply.
DECISION_BUDGET_SHARE = 0.5
# What a reply in words is told when its decision ran out of that share under "auto" (a starved
# decision): the tools' purposes, as something it cannot do now. Without it the words prompt lists no
# tools and the model claimed the action ("Sure, I'll add milk to your shopping list.") or invented
# the data (h40, docs/BENCHMARKS.md). Purposes, not names: a name read out would be tool text.
# Restricted to messages that ask to *do* one of them (h41): the earlier wording ("If the message asks
# for one of them... otherwise answer it") refused a thanks and let a price follow "I cannot".
UNABLE = (
    "You cannot use these services right now: {purposes}. Only if the message asks you to do one of "
    "these things for the user (the action itself, or its live data such as a price, a status or "
    "today's news), say briefly that you cannot do it right now; never say it is done and never give "
    "a value you could not know. Anything else (thanks, greetings, questions, a request you can answer "
    "yourself) you answer as usual."
)
_PURPOSE_CHARS = 160  # of each tool's description in :data:`UNABLE`
# A call under "auto" whose every argument value holds a token the model gave less than this
# log-probability (unconstrained, before the schema grammar) is invented: nothing in the message
# fills it ("How long is a flight from London to New York?" -> check_flight("G678"): -1.88), so the
# turn is answered in words (:func:`invented`; tuning: values taken from the message >= -0.72).
INVENTED_LOGPROB = math.log(0.25)
# A call under "auto" with a string value whose words were said nowhere in the conversation (but for
# derived values: codes, numbers, times, translations; :mod:`gateway.models.heard_values`) is
# answered in words too: "How much does a taxi ride usually cost per mile?" -> order_taxi("New
# York"), a value the model was sure of (tuning at 0.7: 68 -> 69 of 73 under plain and app
# instructions, no need lost; ``bench_tools.py --calibrate``, last column). OFF: on held-out
# material it cost needs (the probe 12 -> 10 of 12, bookings at "nine"; FRESH 92.7 -> 85.4 %,
# every create_reminder lost; docs/BENCHMARKS.md, h41): its derived-value rules know too few times.
HEARD_CHECK = False
# A narrower check, ON: a first call under "auto" with a *name* nobody said (a value with no digit,
# no code, each word capitalised, none of them heard: "How many minutes are in a day?" ->
# get_time("New York")) is answered in words (:func:`gateway.models.heard_values.unheard_names`).
# Times, dates, amounts and free text, which the model writes in forms of its own, are not judged.
# Tuning (stop 44, TUNING with 12 questions of relative times: "at noon", "tomorrow at nine"):
# plain 77 -> 78 of 85, no need lost (the full check: 76, needs lost to "hairdresser" for "haircut"
# and "Friday 10am" for "Friday morning").
NAMES_CHECK = True
_OUTPUT_CHARS = 600  # of each tool output shown to the decision (a long output is cut)

# Worked examples with made-up functions that no app has (so none can be recited or called): a
# question of knowledge on a function's subject is answered in words, a need put indirectly is the
# call. They open the system turn, the same for every session and tool set, so their cells are
# read once per process and shared (tuning, with the listed "answer" option: 45 -> 51 of 54 right,
# see docs/BENCHMARKS.md).
EXAMPLES = (
    "Examples, with other functions (get_pollen_count: Get today's pollen count for a city; "
    "order_pizza: Order a pizza for delivery):\n"
    '- "What is pollen made of?" -> answer (knowledge about the subject, no live data)\n'
    '- "My eyes itch, is it bad out there in Leeds today?" -> get_pollen_count '
    "(today's data, asked indirectly)\n"
    '- "Who invented pizza?" -> answer (history)\n'
    '- "I\'m starving, get us a large margherita." -> order_pizza (the action)\n'
    '- "How do I make pizza dough?" -> answer (advice)\n'
    '- "Thanks, that\'s all." -> answer\n\n'
)
# When a function is needed (both prompts).
_WHEN = (
    "You decide whether the user's message needs one of these functions. A function is needed only "
    "when the user asks for its action or its live data; a question of general knowledge, an "
    "explanation, advice, a story, a joke, a greeting or thanks is answered in words.\n"
)
_ASK = (
    EXAMPLES + _WHEN + "Functions for this conversation:\n{listing}\n"
    "Reply with the name of the function the message needs, or {words} if it is answered in words."
)

_ASK_CHAIN = (
    _WHEN + "{listing}\nReply with the name of the function the message needs, or none if it is answered in words."
)
# After the calls made for a message (in its user turn).
_AGAIN = "\nName a function only if the message still needs another call; none when these results answer it."


@dataclass
class Decision:
    """The choice made before a reply: ``tool`` (None: answer in words), ``call_probability`` (the
    tools' share of the options' probability, 0..1), each option's log-probability, and the
    decision prompt's length in tokens with how many of them were already held (not read again).

    ``likeliest``: the likeliest tool whatever the threshold (None: no tool option); ``words``: the
    name of the words option among ``scores`` (:func:`words_option`). When the
    engine was asked for it (calibration, ``bench_tools.py``), ``call`` is that tool's generated
    call (None: not generated, or cut short) and ``grounding`` its :func:`grounding` (None: not
    judged, as for "required" or a chained decision, or no value to judge)."""

    tool: Optional[str]
    call_probability: float
    scores: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    likeliest: Optional[str] = None
    call: Optional[ToolCall] = None
    grounding: Optional[float] = None
    words: str = WORDS  # the name of the words option among ``scores``
    unheard: Optional[list[str]] = None  # the call's values not heard (:func:`heard_values.unheard`)
    unheard_names: Optional[list[str]] = None  # its names nobody said (:func:`heard_values.unheard_names`)


def words_option(tools: list[FunctionTool], chained: bool = False) -> str:
    """The name of the option that answers in words among ``tools``: :data:`WORDS`, unless a tool
    has that name; :data:`CHAIN_WORDS` after a tool's output (``chained``)."""
    if chained:
        return CHAIN_WORDS
    return WORDS_FALLBACK if any(t.name == WORDS for t in tools) else WORDS


def option_names(tools: list[FunctionTool], choice: str, chained: bool = False) -> list[str]:
    """The replies scored for ``choice`` ("auto": the words option and every tool; "required": the
    tools); ``chained``: after a tool's output."""
    names = [t.name for t in tools]
    return names if choice == "required" else [words_option(tools, chained), *names]


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
    except (ValueError, RecursionError):  # no JSON, or nested past the parser's recursion limit
        return {}
    return value if isinstance(value, dict) else {}


def decision_messages(messages: list[ChatMessage], tools: list[FunctionTool]) -> list[ChatMessage]:
    """The decision prompt: the worked :data:`EXAMPLES`, then the tools (name: description) and the
    words option (:data:`WORDS_LISTING`) in the system turn, and in the user turn the caller's last
    message, followed by the calls made for it so far and their outputs. The system turn is the
    same for every turn of a session (read once, ``prepare``). After a tool's output the first
    round's prompt is used (:data:`CHAIN_WORDS`: no examples, ``none`` not listed)."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    done = [
        f"- {c.name}({c.arguments}) returned: {(output or '')[:_OUTPUT_CHARS]}"
        for c, output in chain_since_request(messages)
    ]
    first, chained = decision_systems(messages, tools)
    if done:
        last = f"{last}\n\nFunctions already called for this message:\n" + "\n".join(done) + _AGAIN
        return [chained, ChatMessage("user", last)]
    return [first, ChatMessage("user", last)]


def decision_systems(messages: list[ChatMessage], tools: list[FunctionTool]) -> tuple[ChatMessage, ChatMessage]:
    """The system turns of a session's decision prompts: the first decision's and the one after a
    tool's output (a chained decision). Each is the same for every turn of the session, so
    ``prepare`` reads both ahead."""
    words = words_option(tools)
    listing = "\n".join(f"- {t.name}: {(t.description or t.name).strip()}" for t in tools)
    first = _ASK.format(listing=f"{listing}\n- {words}: {WORDS_LISTING}", words=words)
    return ChatMessage("system", first), ChatMessage("system", _ASK_CHAIN.format(listing=listing))


def unable_note(tools: list[FunctionTool]) -> ChatMessage:
    """The system turn a starved decision's reply in words follows the caller's message with
    (:data:`UNABLE`): each tool's purpose (its description, cut; its name when it has none)."""
    purposes = [(t.description or t.name).strip().rstrip(".")[:_PURPOSE_CHARS] for t in tools]
    return ChatMessage("system", UNABLE.format(purposes="; ".join(purposes)))


def decide(scores: dict[str, float], threshold: float = CALL_THRESHOLD, words: str = WORDS) -> Decision:
    """The :class:`Decision` from the options' log-probabilities (``scores``: option -> log p;
    ``words``: the name of the words option, :func:`words_option`)."""
    top = max(scores.values())
    weights = {name: math.exp(score - top) for name, score in scores.items()}
    total = sum(weights.values())
    called = {name: w for name, w in weights.items() if name != words}
    share = sum(called.values()) / total
    likeliest = max(called, key=lambda name: called[name]) if called else None
    tool = likeliest if called and share >= threshold else None
    return Decision(tool, share, scores, likeliest=likeliest, words=words)


def auto_call(
    decision: Decision,
    threshold: float = CALL_THRESHOLD,
    floor: float = INVENTED_LOGPROB,
    heard: bool = HEARD_CHECK,
    names: bool = NAMES_CHECK,
) -> Optional[str]:
    """The tool a first decision under "auto" ends in a call of, at ``threshold`` and invented-value
    ``floor``: the tool :func:`decide` names from ``decision.scores``, unless its generated call
    (``decision.call``, with its ``grounding``) was cut short (no call), is invented or (``heard``)
    holds a value not heard (``decision.unheard``) or (``names``) a name nobody said
    (``decision.unheard_names``): words, as the engine does. For calibration: the
    product's outcome at other settings, from one run."""
    tool = decide(decision.scores, threshold, decision.words).tool if decision.scores else None
    if tool is None or decision.call is None or made_up(decision.grounding, floor):
        return None
    if (heard and decision.unheard) or (names and decision.unheard_names):
        return None
    return tool


def argument_values(body: str) -> list[tuple[int, int]]:
    """Character spans of the scalar values (a string's text inside its quotes; a number, true,
    false, null) inside the ``arguments`` object of a generated call ``body``
    (``{"arguments": {...}, "name": ...}``, in either order); keys and the name are not values. A
    string cut short runs to the end of ``body``."""
    spans: list[tuple[int, int]] = []
    keys: list[Optional[str]] = []  # per open container: the last key read (None: an array, or none yet)
    kinds: list[str] = []
    expect_key = False
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        inside = len(kinds) >= 2 and keys[0] == "arguments"
        if c == '"':
            j = i + 1
            while j < n and body[j] != '"':
                j += 2 if body[j] == "\\" else 1
            end = min(j, n)
            if kinds and kinds[-1] == "{" and expect_key:
                keys[-1], expect_key = body[i + 1 : end], False
            elif inside:
                spans.append((i + 1, end))
            i = j + 1
            continue
        if c in "{[":
            kinds.append(c)
            keys.append(None)
            expect_key = c == "{"
        elif c in "}]":
            if kinds:
                kinds.pop()
                keys.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(kinds) and kinds[-1] == "{"
        elif c not in " \t\r\n:":
            j = i
            while j < n and body[j] not in ",}] \t\r\n":
                j += 1
            if inside:
                spans.append((i, j))
            i = j
            continue
        i += 1
    return spans


def grounding(pieces: list[tuple[str, float]]) -> Optional[float]:
    """How well a generated call's arguments are grounded: over its argument values
    (:func:`argument_values`), the best value's weakest token log-probability (``pieces``: each
    generated token's text and the model's log-probability of it, in order). None when the call
    has no value with text (no arguments, only empty strings)."""
    body = "".join(text for text, _ in pieces)
    starts, at = [], 0
    for text, _ in pieces:
        starts.append(at)
        at += len(text)
    best: Optional[float] = None
    for first, last in argument_values(body):
        inside = [
            lp for (text, lp), start in zip(pieces, starts, strict=True) if start < last and start + len(text) > first
        ]
        if inside:
            weakest = min(inside)
            best = weakest if best is None else max(best, weakest)
    return best


def invented(pieces: list[tuple[str, float]], floor: float = INVENTED_LOGPROB) -> bool:
    """True when every argument value of a generated call holds a token the model gave under
    ``floor`` (log-probability): the message fills none of them, so "auto" answers in words."""
    return made_up(grounding(pieces), floor)


def made_up(score: Optional[float], floor: float = INVENTED_LOGPROB) -> bool:
    """True when a call's :func:`grounding` ``score`` is under ``floor`` (None: nothing to judge)."""
    return score is not None and score < floor
