#!/usr/bin/env python3
"""Function calling of the real LLM engine: does it call a tool when the question needs one, the
right one, and only then?

    .venv/bin/python scripts/bench_tools.py                 # through gateway calls (WebRTC, loopback)
    .venv/bin/python scripts/bench_tools.py --direct        # straight through the LanguageModel interface
    .venv/bin/python scripts/bench_tools.py --decisions     # the call decision (+ the call's arguments), no reply
    .venv/bin/python scripts/bench_tools.py --calibrate     # threshold and invented-argument floor, on tuning
    .venv/bin/python scripts/bench_tools.py --fresh         # also the frozen FRESH set (measure it rarely)

Questions (``scripts/tool_questions.py``): ``BENCH``, 48 held-out questions offered 1 to 4 tools each
(tool / no tool / which tool), run under each instruction style of ``--styles`` (default: plain
"You are a helpful assistant." and an app's own instructions); ``PROBE``, 12 held-out questions under
plain instructions with ``get_weather`` and ``book_table``; ``TUNING``, the questions (with tools and
app instructions of their own) that the decision's prompt and threshold were tuned on
(``--calibrate`` prints accuracy per threshold there, of the decision alone and of what "auto"
does: the decision and the invented-argument check on the call, per floor of that check, then with
the check that the call's names were said (the engine's) or, instead, that all its values were
heard (off), ``gateway/models/heard_values.py``);
``FRESH`` (``--fresh``), 41 held-out questions with tools and instructions of their own, frozen
before the last round of tuning. By
default a gateway is started in this process on the configured engine (``VG_*`` variables apply),
one Realtime call is placed per style with its instructions, and each question is one out-of-band
text response (``conversation: "none"``, its own ``tools``, ``tool_choice: "auto"``), so the
questions do not see each other.

Prints one row per question, then per style: decision accuracy (the expected tool called, or none;
target >= 95 %), calls where none was wanted, calls missed, wrong tool, arguments valid against the
tool's schema (target 100 %) and holding the expected value, replies in words that recite tool text
(a tool's name, ``<tool_call>``, a JSON object, "parameters"; target 0), and median latency (request
sent -> done; seconds; replies in words are cut at ``--max-tokens``). Then precision and recall per
tool over all styles. ``--direct`` also times the decision step alone (what it adds to every turn
with tools) and prints the machine's decode speed.

Then "answer uses the tool output": six round trips (a question, the model's call, the tool's
output as a ``function_call_output`` item) with outputs of different shapes, each answered as one
out-of-band response whose ``input`` holds the three items; an answer counts when it holds every
expected value (digits or the words a person says). Target 100 %.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

from tool_questions import (
    BENCH,
    FRESH,
    FRESH_STYLES,
    PROBE,
    PROBE_INSTRUCTIONS,
    STYLES,
    TOOLS,
    TUNING,
    TUNING_STYLES,
    Question,
)

OUTPUT_TOOLS = ("get_weather", "set_timer", "get_time", "convert_currency")
RECITED = ("<tool", "</", '{"', "```", "parameters", "function")  # tool text a spoken reply must not hold


def function_tools(names: tuple[str, ...]) -> list[Any]:
    """``FunctionTool`` objects of the named tools of ``TOOLS``."""
    from gateway.models.base import FunctionTool

    return [FunctionTool(n, TOOLS[n]["description"], TOOLS[n]["parameters"]) for n in names]


def recites_tools(question: Question, text: str) -> bool:
    """True when a reply in words holds tool text: a tool's name or call/schema syntax."""
    said = text.lower()
    return any(name in said for name in question.tools) or any(mark in said for mark in RECITED)


@dataclass
class OutputCase:
    """A finished call and its output; the answer must hold each of ``expect`` (any alternative)."""

    prompt: str
    tool: str
    arguments: dict[str, Any]
    output: Any
    expect: list[tuple[str, ...]]


OUTPUT_CASES = [
    OutputCase(
        "What's the weather in Paris right now?",
        "get_weather",
        {"city": "Paris"},
        {"city": "Paris", "temperature_c": 31, "sky": "sunny"},
        [("31", "thirty one"), ("sunny", "sun")],
    ),
    OutputCase(
        "How's the weather in Tokyo today?",
        "get_weather",
        {"city": "Tokyo"},
        {"location": {"city": "Tokyo"}, "current": {"temp_c": 12, "condition": "light rain"}},
        [("12", "twelve"), ("rain",)],
    ),
    OutputCase(
        "Will it be cold in London this week?",
        "get_weather",
        {"city": "London"},
        [{"day": "Monday", "high_c": 9, "sky": "cloudy"}, {"day": "Tuesday", "high_c": 7, "sky": "fog"}],
        [("9", "nine"), ("7", "seven")],
    ),
    OutputCase(
        "What time is it in New York?",
        "get_time",
        {"city": "New York"},
        "It is 14:05 in New York.",
        [("14:05", "2:05", "two oh five", "fourteen oh five", "five past two")],
    ),
    OutputCase(
        "Convert 100 dollars to euros.",
        "convert_currency",
        {"amount": 100, "from_currency": "USD", "to_currency": "EUR"},
        {"amount": 100, "from": "USD", "to": "EUR", "result": 92.37},
        [("92", "ninety two")],
    ),
    OutputCase(
        "Set a timer for ten minutes.",
        "set_timer",
        {"minutes": 10},
        {"status": "started", "minutes": 10, "ends_at": "18:40"},
        [("10", "ten")],
    ),
]


def uses_output(case: OutputCase, text: str) -> bool:
    """True when ``text`` holds every expected value (any of its alternatives, case and hyphens ignored)."""
    said = text.lower().replace("-", " ")
    return all(any(alt in said for alt in alternatives) for alternatives in case.expect)


def output_items(case: OutputCase) -> list[dict[str, Any]]:
    """The case as Realtime items: the question, the call, its output."""
    output = case.output if isinstance(case.output, str) else json.dumps(case.output)
    return [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": case.prompt}]},
        {"type": "function_call", "call_id": "call_bench1", "name": case.tool, "arguments": json.dumps(case.arguments)},
        {"type": "function_call_output", "call_id": "call_bench1", "output": output},
    ]


@dataclass
class Outcome:
    called: Optional[str]
    arguments: str
    text: str
    seconds: float
    decision_s: Optional[float] = None  # the decision step alone (--direct)
    call_probability: Optional[float] = None
    scores: Optional[dict[str, float]] = None  # the decision's option log-probabilities
    decision_read: Optional[int] = None  # decision prompt tokens read in its turn (not held already)
    decision: Any = None  # the engine's Decision, with the likeliest tool's call when one was asked for


def arguments_valid(tool_name: str, arguments: str) -> bool:
    """JSON text that validates against the tool's ``parameters`` (jsonschema when installed, else
    the required keys and their JSON types)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return False
    schema = TOOLS[tool_name]["parameters"]
    try:
        import jsonschema
    except ImportError:
        kinds: dict[str, Any] = {"string": str, "integer": int, "number": (int, float), "boolean": bool}
        return isinstance(value, dict) and all(
            key in value and isinstance(value[key], kinds[schema["properties"][key]["type"]])
            for key in schema["required"]
        )
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


# ---------------------------------------------------------------- engines
def load_engine() -> Any:
    """The configured LanguageModel (``VG_*`` config)."""
    from gateway.config import GatewayConfig
    from gateway.models.backends import load_backend

    return load_backend("llm", GatewayConfig.from_env())


def system_of(instructions: Optional[str]) -> str:
    """The session's instructions for a style (None: the gateway's configured ones)."""
    from gateway.config import GatewayConfig

    return instructions if instructions is not None else GatewayConfig.from_env().instructions


def run_direct(
    llm: Any,
    questions: list[Question],
    instructions: Optional[str],
    max_tokens: int,
    decide_only: bool,
    call_from: Optional[float] = None,
):
    """Each question through ``llm`` (no gateway): the decision step timed alone (when the engine
    has one), then the reply unless ``decide_only``. With ``decide_only`` the decision comes with
    the likeliest tool's call when the tools' share is at least ``call_from`` (default: the
    engine's threshold, so the outcome is what "auto" does: a call cut short or with invented
    arguments is words)."""
    from gateway.models.base import ChatMessage, GenerationOptions
    from gateway.models.tool_decision import auto_call

    system = ChatMessage("system", system_of(instructions))
    outcomes = []
    for q in questions:
        messages = [system, ChatMessage("user", q.prompt)]
        options = GenerationOptions(tools=function_tools(q.tools), tool_choice="auto")
        decision, decision_s = None, None
        if decide_only:
            assert hasattr(llm, "decide_tool"), "--decisions needs an engine with a decision step"
            started = time.monotonic()
            decision = llm.decide_tool(messages, options, call_from=call_from or llm.call_threshold)
            seconds = time.monotonic() - started  # the decision and, when it may stand, the call
            if decision is None:  # past its share of the compute budget: "auto" answers in words
                outcomes.append(Outcome(None, "", "[decision out of budget]", seconds))
                continue
            call = decision.call
            outcomes.append(
                Outcome(
                    auto_call(decision, llm.call_threshold),
                    call.arguments if call and call.name == auto_call(decision, llm.call_threshold) else "",
                    "",
                    seconds,
                    None,
                    decision.call_probability,
                    decision.scores,
                    decision.prompt_tokens - decision.cached_tokens,
                    decision,
                )
            )
            continue
        if hasattr(llm, "decide_tool"):
            started = time.monotonic()
            decision = llm.decide_tool(messages, options)
            decision_s = time.monotonic() - started
        started = time.monotonic()
        result = llm.generate(messages, max_tokens, lambda: False, lambda piece: None, options)
        call = result.tool_calls[0] if result.tool_calls else None
        outcomes.append(
            Outcome(
                call.name if call else None,
                call.arguments if call else "",
                result.text,
                time.monotonic() - started,
                decision_s,
                decision.call_probability if decision else None,
                decision_read=decision.prompt_tokens - decision.cached_tokens if decision else None,
            )
        )
    return outcomes


def run_direct_outputs(llm: Any, instructions: Optional[str]) -> list[Outcome]:
    """Each tool output round trip through the configured LanguageModel, no gateway."""
    from gateway.config import GatewayConfig
    from gateway.models.base import ChatMessage, GenerationOptions
    from gateway.realtime.conversation import chat_messages

    config = GatewayConfig.from_env()
    tools = function_tools(OUTPUT_TOOLS)
    system = ChatMessage("system", instructions if instructions is not None else config.instructions)
    outcomes = []
    for case in OUTPUT_CASES:
        started = time.monotonic()
        result = llm.generate(
            [system, *chat_messages(output_items(case))],
            config.max_response_tokens,
            lambda: False,
            lambda piece: None,
            GenerationOptions(tools=tools, tool_choice="auto"),
        )
        call = result.tool_calls[0] if result.tool_calls else None
        outcomes.append(Outcome(call.name if call else None, "", result.text, time.monotonic() - started))
    return outcomes


async def run_gateway(
    url: Optional[str], runs: list[tuple[list[Question], Optional[str]]], max_tokens: int
) -> tuple[list[list[Outcome]], list[Outcome]]:
    """Each (questions, instructions) run as one Realtime call, then the tool output round trips."""
    from gateway.client import RealtimeClient
    from gateway.config import GatewayConfig
    from gateway.server.runner import free_port, running_gateway

    async def calls(base_url: str) -> tuple[list[list[Outcome]], list[Outcome]]:
        results = [await _call(RealtimeClient(base_url), qs, instructions, max_tokens) for qs, instructions in runs]
        return results, await _outputs(RealtimeClient(base_url))

    if url is not None:
        return await calls(url)
    config = GatewayConfig.from_env(port=free_port(), pool_size=1)
    async with running_gateway(config) as (base_url, _app):
        return await calls(base_url)


async def _respond(client: Any, items: list[dict[str, Any]], extra: Optional[dict[str, Any]] = None) -> Outcome:
    """One out-of-band text response to ``items``: what it called or said, and how long it took."""
    mark = len(client.events)
    started = time.monotonic()
    response = {"conversation": "none", "input": items, **(extra or {})}
    client.send({"type": "response.create", "response": response})
    done = (await client.wait_for("response.done", timeout=120, after=mark))["response"]
    seconds = time.monotonic() - started
    calls = [o for o in done["output"] if o["type"] == "function_call"]
    texts = [part.get("text", "") for o in done["output"] if o["type"] == "message" for part in o["content"]]
    if done["status"] not in ("completed", "incomplete"):
        errors = [e["error"]["message"] for e in client.of_type("error", after=mark)]
        texts.append(f"[{done['status']}] {' '.join(errors)}")
    return Outcome(
        calls[0]["name"] if calls else None, calls[0]["arguments"] if calls else "", " ".join(texts), seconds
    )


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def _call(client: Any, questions: list[Question], instructions: Optional[str], max_tokens: int) -> list[Outcome]:
    session: dict[str, Any] = {"type": "realtime", "output_modalities": ["text"]}
    if instructions is not None:
        session["instructions"] = instructions
    if await client.connect(session=session) != 201:
        raise RuntimeError(f"the gateway refused the call: {client.error_body}")
    try:
        return [
            await _respond(
                client,
                [_user(q.prompt)],
                {"tools": [TOOLS[n] for n in q.tools], "tool_choice": "auto", "max_output_tokens": max_tokens},
            )
            for q in questions
        ]
    finally:
        await client.hangup()


async def _outputs(client: Any) -> list[Outcome]:
    session = {"type": "realtime", "output_modalities": ["text"], "tools": [TOOLS[n] for n in OUTPUT_TOOLS]}
    if await client.connect(session=session) != 201:
        raise RuntimeError(f"the gateway refused the call: {client.error_body}")
    try:
        return [await _respond(client, output_items(case)) for case in OUTPUT_CASES]
    finally:
        await client.hangup()


# ---------------------------------------------------------------- report
def rows(name: str, questions: list[Question], outcomes: list[Outcome]) -> None:
    """One row per question."""
    print(f"\n{name}\n{'question':<48} {'tools':<5} {'expected':<17} {'got':<17} {'ok':<3} {'p':>5} {'s':>5}  reply")
    for q, out in zip(questions, outcomes, strict=True):
        p = "" if out.call_probability is None else f"{out.call_probability:.2f}"
        shown = out.arguments if out.called else out.text
        ok = "yes" if out.called == q.tool else "NO"
        print(
            f"{q.prompt[:47]:<48} {len(q.tools):<5} {q.tool or '-':<17} {out.called or '-':<17} {ok:<3} "
            f"{p:>5} {out.seconds:5.2f}  {shown[:60]!r}"
        )


def summary(questions: list[Question], outcomes: list[Outcome]) -> dict[str, Any]:
    """The numbers of one style's run."""
    pairs = list(zip(questions, outcomes, strict=True))
    calls = [(q, o) for q, o in pairs if o.called]
    words = [(q, o) for q, o in pairs if not o.called]
    return {
        "n": len(pairs),
        "right": sum(o.called == q.tool for q, o in pairs),
        "false_calls": sum(q.tool is None for q, o in calls),
        "missed": sum(q.tool is not None for q, o in words),
        "wrong_tool": sum(q.tool is not None and o.called != q.tool for q, o in calls),
        "calls": len(calls),
        "right_calls": sum(o.called == q.tool for q, o in calls),
        "valid": sum(arguments_valid(o.called, o.arguments) for q, o in calls),
        "args_right": sum(q.expect in o.arguments.lower() for q, o in calls if o.called == q.tool),
        "recited": sum(recites_tools(q, o.text) for q, o in words),
        "words": len(words),
        "s_tool": _median([o.seconds for q, o in calls]),
        "s_words": _median([o.seconds for q, o in words]),
        "decision_s": _median([o.decision_s for o in outcomes if o.decision_s is not None]),
        "decision_read": _median([o.decision_read for o in outcomes if o.decision_read is not None]),
        "replies": any(o.text for o in outcomes),  # False: --decisions, no reply in words to check
    }


def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _s(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def _n(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.0f}"


def style_table(results: dict[str, dict[str, Any]]) -> None:
    """One row per instruction style (and the probe)."""
    print(
        "\n| set / instructions | decision right | calls not wanted | calls missed | wrong tool | arguments valid "
        "| arguments right | replies reciting tool text | decision step s (tokens read) | median s (call / words) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        if not r["replies"]:  # --decisions: the calls are made (their arguments count), no words are said
            r = {**r, "recited": "-", "words": "-"}
        print(
            f"| {name} | {100 * r['right'] / r['n']:.1f}% ({r['right']}/{r['n']}) | {r['false_calls']} | {r['missed']} "
            f"| {r['wrong_tool']} | {r['valid']}/{r['calls']} | {r['args_right']}/{r['right_calls']} "
            f"| {r['recited']}/{r['words']} | {_s(r['decision_s'])} ({_n(r['decision_read'])}) "
            f"| {_s(r['s_tool'])} / {_s(r['s_words'])} |"
        )


def tool_table(pairs: list[tuple[Question, Outcome]]) -> None:
    """Precision and recall per tool (and for answering in words) over ``pairs``."""
    print("\n| tool | questions needing it | calls of it | precision | recall |\n|---|---|---|---|---|")
    names = [*sorted({q.tool for q, _ in pairs if q.tool}), None]
    for name in names:
        needed = sum(q.tool == name for q, _ in pairs)
        made = sum(o.called == name for _, o in pairs)
        hit = sum(q.tool == name and o.called == name for q, o in pairs)
        precision = f"{100 * hit / made:.0f}%" if made else "-"
        recall = f"{100 * hit / needed:.0f}%" if needed else "-"
        print(f"| {name or '(words)'} | {needed} | {made} | {precision} ({hit}/{made}) | {recall} ({hit}/{needed}) |")


THRESHOLDS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
FLOORS = (0.1, 0.25, 0.5)  # the invented-argument check's floor, as a probability (log of it)


def calibrate(questions: list[Question], outcomes: list[Outcome]) -> None:
    """Accuracy on the tuning set at each threshold, from one run: the decision alone, what "auto"
    does with the invented-argument check alone on the likeliest tool's call at each floor of the
    check (the engine's: ``INVENTED_LOGPROB``), with the check that names were said added (what the
    engine does: ``NAMES_CHECK``), and with the full heard-values check instead (off)."""
    from gateway.models.tool_decision import INVENTED_LOGPROB, auto_call, decide

    def right(pick: Any) -> str:
        n = sum(pick(o.decision) == q.tool for q, o in zip(questions, outcomes, strict=True))
        return f"{100 * n / len(questions):.1f}% ({n}/{len(questions)})"

    floors = [math.log(p) for p in FLOORS]
    named = [
        f"+ check, floor log {p}" + (" (engine's)" if abs(f - INVENTED_LOGPROB) < 1e-9 else "")
        for p, f in zip(FLOORS, floors, strict=True)
    ]
    named.append("+ check (engine's floor) + names said (the engine's)")
    named.append("+ check (engine's floor) + values heard")
    print(f"\n| threshold | decision alone | {' | '.join(named)} |\n|{'---|' * (4 + len(floors))}")
    for threshold in THRESHOLDS:
        alone = right(lambda d, t=threshold: decide(d.scores, t, d.words).tool if d else None)
        checked = [
            right(lambda d, t=threshold, f=floor: auto_call(d, t, f, False, False) if d else None) for floor in floors
        ]
        checked.append(right(lambda d, t=threshold: auto_call(d, t, INVENTED_LOGPROB, False, True) if d else None))
        checked.append(right(lambda d, t=threshold: auto_call(d, t, INVENTED_LOGPROB, True, False) if d else None))
        print(f"| {threshold} | {alone} | {' | '.join(checked)} |")


def report_outputs(answers: list[Outcome]) -> float:
    """Print the "answer uses the tool output" rows and summary; returns the % of answers that use it."""
    print(f"\n{'question':<40} {'output':<40} {'used':<4} {'s':>5}  answer")
    used = 0
    for case, out in zip(OUTPUT_CASES, answers, strict=True):
        ok = out.called is None and uses_output(case, out.text)
        used += ok
        shown = case.output if isinstance(case.output, str) else json.dumps(case.output)
        answer = f"[called {out.called}] " if out.called else ""
        print(
            f"{case.prompt[:39]:<40} {shown[:39]:<40} {'yes' if ok else 'NO':<4} {out.seconds:5.2f}  "
            f"{answer}{out.text[:70]}"
        )
    pct = 100.0 * used / len(OUTPUT_CASES)
    print("\n| answer uses the tool output | median s |\n|---|---|")
    print(f"| {pct:.0f}% ({used}/{len(OUTPUT_CASES)}) | {statistics.median(o.seconds for o in answers):.2f} |")
    return pct


def decode_line(llm: Any) -> None:
    """The machine's llama.cpp decode speed, printed beside every latency table."""
    import os

    if hasattr(llm, "decoder"):
        from bench_batch_decode import decode_speed

        one, two = decode_speed(llm, 1), decode_speed(llm, 2)
        print(f"machine: decode {one:.1f} tok/s on 1 thread, {two:.1f} on 2 ({llm.name}); ", end="")
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direct", action="store_true", help="call the LanguageModel directly, no gateway")
    parser.add_argument(
        "--decisions",
        action="store_true",
        help="the call decision and a call's arguments (invented: words), no reply (implies --direct)",
    )
    parser.add_argument(
        "--calibrate", action="store_true", help="accuracy per threshold and invented-argument floor, on tuning"
    )
    parser.add_argument("--url", help="a running gateway to call instead of starting one")
    parser.add_argument(
        "--styles", default="plain,app", help=f"instruction styles of the bench set ({', '.join(STYLES)})"
    )
    parser.add_argument("--max-tokens", type=int, default=40, help="cut replies in words at this many tokens")
    parser.add_argument("--no-outputs", action="store_true", help="skip the tool output round trips")
    parser.add_argument("--fresh", action="store_true", help="also the frozen FRESH set (plain and app)")
    args = parser.parse_args()
    if args.calibrate:
        llm = load_engine()
        for style in args.styles.split(","):
            outcomes = run_direct(llm, TUNING, TUNING_STYLES[style], 1, decide_only=True, call_from=min(THRESHOLDS))
            rows(f"tuning / {style}", TUNING, outcomes)
            calibrate(TUNING, outcomes)
        return 0
    runs = {f"bench / {s}": (BENCH, STYLES[s]) for s in args.styles.split(",")}
    runs["probe / plain"] = (PROBE, PROBE_INSTRUCTIONS)
    if args.fresh:
        runs.update({f"fresh / {s}": (FRESH, FRESH_STYLES[s]) for s in ("plain", "app")})
    answers: list[Outcome] = []
    if args.direct or args.decisions:
        llm = load_engine()
        decode_line(llm)
        results = [run_direct(llm, qs, ins, args.max_tokens, args.decisions) for qs, ins in runs.values()]
        if not args.decisions and not args.no_outputs:
            answers = run_direct_outputs(llm, STYLES["plain"])
    else:
        results, answers = asyncio.run(run_gateway(args.url, list(runs.values()), args.max_tokens))
    numbers = {}
    for (name, (questions, _)), outcomes in zip(runs.items(), results, strict=True):
        rows(name, questions, outcomes)
        numbers[name] = summary(questions, outcomes)
    style_table(numbers)
    for kind in ("bench", "fresh"):
        pairs = [
            pair
            for (name, (qs, _)), outs in zip(runs.items(), results, strict=True)
            if name.startswith(kind)
            for pair in zip(qs, outs, strict=True)
        ]
        if pairs:
            print(f"\n{kind}, all styles:", end="")
            tool_table(pairs)
    used = report_outputs(answers) if answers else 100.0
    good = all(r["right"] >= 0.95 * r["n"] for r in numbers.values()) and numbers["probe / plain"]["right"] >= 11
    return 0 if good and used == 100 else 1


if __name__ == "__main__":
    sys.exit(main())
