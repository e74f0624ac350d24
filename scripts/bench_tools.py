#!/usr/bin/env python3
"""Function calling of the real LLM engine: does it call a tool when it should, and only then?

    .venv/bin/python scripts/bench_tools.py            # through a gateway call (WebRTC, loopback)
    .venv/bin/python scripts/bench_tools.py --direct   # straight through the LanguageModel interface
    .venv/bin/python scripts/bench_tools.py --url http://127.0.0.1:8080   # a running gateway

Twenty-four prompts of a voice assistant with a small toolset (weather, timer, time, currency):
half need a tool, half must be answered in words. By default a gateway is started in this process
on the configured engine (``VG_*`` variables apply, e.g. ``VG_LLM_MODEL``), one Realtime call is
placed with the toolset in ``session.tools``, and each prompt is one out-of-band text response
(``conversation: "none"``, the prompt as its ``input``), so the prompts do not see each other.
``--instructions`` replaces the session's (default: the gateway's own).

Prints one row per prompt and a summary: call decision right (the expected tool called, or none
called; target >= 90%), arguments valid (JSON that validates against the tool's ``parameters``;
target 100%), arguments right (the expected value in them), and the median latency (response.create
sent -> response.done received; ``--direct``: the ``generate`` call), in seconds.

Then "answer uses the tool output": six round trips (a question, the model's call, the tool's
output as a ``function_call_output`` item) with outputs of different shapes (a flat object, a
nested one, an array, a plain string, numbers with decimals), each answered as one out-of-band
response whose ``input`` holds the three items; an answer counts when it holds every expected value
(digits or the words a person says, e.g. "31" or "thirty-one"). Target 100%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Optional

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
    },
    {
        "type": "function",
        "name": "set_timer",
        "description": "Start a countdown timer.",
        "parameters": {
            "type": "object",
            "required": ["minutes"],
            "properties": {"minutes": {"type": "integer", "description": "Length in minutes"}},
        },
    },
    {
        "type": "function",
        "name": "get_time",
        "description": "The current local time in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "type": "function",
        "name": "convert_currency",
        "description": "Convert an amount of money between currencies.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number"},
                "from_currency": {"type": "string", "description": "ISO code, e.g. USD"},
                "to_currency": {"type": "string", "description": "ISO code, e.g. EUR"},
            },
            "required": ["amount", "from_currency", "to_currency"],
        },
    },
]


@dataclass
class Case:
    prompt: str
    tool: Optional[str] = None  # the tool it needs; None: answer in words
    expect: str = ""  # a value the arguments must hold (lower-case, as text)


CASES = [
    Case("What's the weather in Paris?", "get_weather", "paris"),
    Case("Is it raining in London right now?", "get_weather", "london"),
    Case("How hot is it in Tokyo today?", "get_weather", "tokyo"),
    Case("Do I need an umbrella in Seattle today?", "get_weather", "seattle"),
    Case("Set a timer for ten minutes.", "set_timer", "10"),
    Case("Start a five minute timer for the pasta.", "set_timer", "5"),
    Case("Please time twenty minutes for me.", "set_timer", "20"),
    Case("What time is it in New York?", "get_time", "new york"),
    Case("Can you tell me the current time in Sydney?", "get_time", "sydney"),
    Case("What's the local time in Berlin?", "get_time", "berlin"),
    Case("Convert 100 dollars to euros.", "convert_currency", "100"),
    Case("How much is 50 British pounds in Japanese yen?", "convert_currency", "50"),
    Case("What is the capital of France?"),
    Case("Tell me a short joke."),
    Case("How many legs does a spider have?"),
    Case("Who wrote Romeo and Juliet?"),
    Case("What's two plus two?"),
    Case("Thanks, that's all for now."),
    Case("Why is the sky blue?"),
    Case("How do I boil an egg?"),
    Case("What is the largest planet in our solar system?"),
    Case("Hello, how are you?"),
    Case("What language do people speak in Brazil?"),
    Case("What does a thermometer measure?"),
]


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


def arguments_valid(tool_name: str, arguments: str) -> bool:
    """JSON text that validates against the tool's ``parameters`` (jsonschema when installed, else
    the required keys and their JSON types)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return False
    schema = next(t["parameters"] for t in TOOLS if t["name"] == tool_name)
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
def run_direct(instructions: Optional[str]) -> list[Outcome]:
    """Each prompt through the configured LanguageModel (``VG_*`` config), no gateway."""
    from gateway.config import GatewayConfig
    from gateway.models.backends import load_backend
    from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions

    config = GatewayConfig.from_env()
    llm = load_backend("llm", config)
    tools = [FunctionTool(t["name"], t["description"], t["parameters"]) for t in TOOLS]
    system = instructions if instructions is not None else config.instructions
    outcomes = []
    for case in CASES:
        started = time.monotonic()
        result = llm.generate(
            [ChatMessage("system", system), ChatMessage("user", case.prompt)],
            config.max_response_tokens,
            lambda: False,
            lambda piece: None,
            GenerationOptions(tools=tools, tool_choice="auto"),
        )
        call = result.tool_calls[0] if result.tool_calls else None
        outcomes.append(
            Outcome(
                call.name if call else None, call.arguments if call else "", result.text, time.monotonic() - started
            )
        )
    return outcomes


def run_direct_outputs(instructions: Optional[str]) -> list[Outcome]:
    """Each tool output round trip through the configured LanguageModel, no gateway."""
    from gateway.config import GatewayConfig
    from gateway.models.backends import load_backend
    from gateway.models.base import ChatMessage, FunctionTool, GenerationOptions
    from gateway.realtime.conversation import chat_messages

    config = GatewayConfig.from_env()
    llm = load_backend("llm", config)
    tools = [FunctionTool(t["name"], t["description"], t["parameters"]) for t in TOOLS]
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


async def run_gateway(url: Optional[str], instructions: Optional[str]) -> tuple[list[Outcome], list[Outcome]]:
    """Each prompt, then each tool output round trip, as an out-of-band text response of one
    Realtime call with the toolset."""
    from gateway.client import RealtimeClient
    from gateway.config import GatewayConfig
    from gateway.server.runner import free_port, running_gateway

    if url is not None:
        return await _call(RealtimeClient(url), instructions)
    config = GatewayConfig.from_env(port=free_port(), pool_size=1)
    async with running_gateway(config) as (base_url, _app):
        return await _call(RealtimeClient(base_url), instructions)


async def _respond(client: Any, items: list[dict[str, Any]]) -> Outcome:
    """One out-of-band text response to ``items``: what it called or said, and how long it took."""
    mark = len(client.events)
    started = time.monotonic()
    client.send({"type": "response.create", "response": {"conversation": "none", "input": items}})
    done = (await client.wait_for("response.done", timeout=120, after=mark))["response"]
    seconds = time.monotonic() - started
    calls = [o for o in done["output"] if o["type"] == "function_call"]
    texts = [part.get("text", "") for o in done["output"] if o["type"] == "message" for part in o["content"]]
    if done["status"] != "completed":
        errors = [e["error"]["message"] for e in client.of_type("error", after=mark)]
        texts.append(f"[{done['status']}] {' '.join(errors)}")
    return Outcome(
        calls[0]["name"] if calls else None, calls[0]["arguments"] if calls else "", " ".join(texts), seconds
    )


async def _call(client: Any, instructions: Optional[str]) -> tuple[list[Outcome], list[Outcome]]:
    session: dict[str, Any] = {"type": "realtime", "tools": TOOLS, "tool_choice": "auto", "output_modalities": ["text"]}
    if instructions is not None:
        session["instructions"] = instructions
    if await client.connect(session=session) != 201:
        raise RuntimeError(f"the gateway refused the call: {client.error_body}")
    try:
        outcomes = []
        for case in CASES:
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": case.prompt}]}
            outcomes.append(await _respond(client, [item]))
        answers = [await _respond(client, output_items(case)) for case in OUTPUT_CASES]
    finally:
        await client.hangup()
    return outcomes, answers


# ---------------------------------------------------------------- report
def report(outcomes: list[Outcome]) -> dict[str, float]:
    """Print the table and the summary; returns the summary's numbers."""
    print(f"{'prompt':<48} {'expected':<17} {'got':<17} {'ok':<3} {'args':<5} {'s':>5}  arguments / reply")
    right = valid = correct = calls = 0
    for case, out in zip(CASES, outcomes, strict=True):
        ok = out.called == case.tool
        right += ok
        args = ""
        if out.called:
            calls += 1
            good = arguments_valid(out.called, out.arguments)
            valid += good
            args = "valid" if good else "BAD"
            if ok and case.expect in out.arguments.lower():
                correct += 1
        shown = out.arguments if out.called else out.text
        print(
            f"{case.prompt[:47]:<48} {case.tool or '-':<17} {out.called or '-':<17} {'yes' if ok else 'NO':<3} "
            f"{args:<5} {out.seconds:5.2f}  {shown[:70]}"
        )
    needing = [c for c in CASES if c.tool]
    summary = {
        "decision_right_pct": 100.0 * right / len(CASES),
        "arguments_valid_pct": 100.0 * valid / calls if calls else 100.0,
        "arguments_right_pct": 100.0 * correct / len(needing),
        "median_s_tool": statistics.median(o.seconds for c, o in zip(CASES, outcomes, strict=True) if c.tool),
        "median_s_words": statistics.median(o.seconds for c, o in zip(CASES, outcomes, strict=True) if not c.tool),
        "median_s": statistics.median(o.seconds for o in outcomes),
    }
    print()
    print("| prompts | call decision right | arguments valid | arguments right | median s (tool / words / all) |")
    print("|---|---|---|---|---|")
    print(
        f"| {len(CASES)} ({len(needing)} need a tool) | {summary['decision_right_pct']:.0f}% "
        f"({right}/{len(CASES)}) | {summary['arguments_valid_pct']:.0f}% ({valid}/{calls}) "
        f"| {summary['arguments_right_pct']:.0f}% ({correct}/{len(needing)}) | {summary['median_s_tool']:.2f} / "
        f"{summary['median_s_words']:.2f} / {summary['median_s']:.2f} |"
    )
    return summary


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--direct", action="store_true", help="call the LanguageModel directly, no gateway")
    parser.add_argument("--url", help="a running gateway to call instead of starting one")
    parser.add_argument("--instructions", help="session instructions (default: the gateway's)")
    args = parser.parse_args()
    if args.direct:
        outcomes, answers = run_direct(args.instructions), run_direct_outputs(args.instructions)
    else:
        outcomes, answers = asyncio.run(run_gateway(args.url, args.instructions))
    summary = report(outcomes)
    used = report_outputs(answers)
    return 0 if summary["decision_right_pct"] >= 90 and summary["arguments_valid_pct"] == 100 and used == 100 else 1


if __name__ == "__main__":
    sys.exit(main())
