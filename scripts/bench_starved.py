#!/usr/bin/env python3
"""A call decision that runs out of its share of the compute budget (a loaded box): does the reply
in words under "auto" claim an action or state live data it could not have?

    .venv/bin/python scripts/bench_starved.py                   # TUNING questions, plain and app
    .venv/bin/python scripts/bench_starved.py --styles plain
    .venv/bin/python scripts/bench_starved.py --every 3 --offset 1   # another third of TUNING

Straight through the configured LanguageModel (``VG_*`` variables apply), on the TUNING questions of
``scripts/tool_questions.py`` only, with the engine's ``decision_budget_share`` set to 0 so every
decision starves (as a loaded box does) and each question is answered in words. A small keyword
judge sorts each reply (read them too; every reply is printed whole):

- a question that needs an action or live data (``play_music``, ``order_taxi``, ``check_flight``...):
  truthful when it says it cannot (:data:`CANNOT`), else it claims the action or states data it could
  not have ("Sure, I'll add milk to your shopping list.", "Apple is trading at $150");
- a translation (``translate_text``): the model can answer it itself, so either is truthful; counted
  as translated or refused;
- a knowledge question: answered, or refused (it says it cannot: wrong, "Why do we dream?" has an
  answer).

Replies reciting tool text (a tool's name, call syntax) are counted as in ``bench_tools.py``. To
measure the engine of another checkout (before a change), run this file with that checkout first on
``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from bench_tools import decode_line, load_engine, recites_tools, run_direct
from tool_questions import TUNING, TUNING_STYLES, Question

CANNOT = (
    "can't",
    "cannot",
    "can not",
    "unable",
    "not able",
    "don't have access",
    "do not have access",
    "not possible",
    "no access",
    "i'm sorry",
    "sorry",
)
SELF_ANSWERED = ("translate_text",)  # a need the model can answer in words itself


def cannot(text: str) -> bool:
    """True when ``text`` says the assistant cannot do something."""
    said = text.lower().replace("\u2019", "'")
    return any(mark in said for mark in CANNOT)


def kind(question: Question) -> str:
    if question.tool is None:
        return "knowledge"
    return "self" if question.tool in SELF_ANSWERED else "need"


def verdict(question: Question, text: str) -> str:
    """The judge's word on one reply: claims / cannot (a need), translated / refused (a
    translation), answered / refused / empty (knowledge)."""
    if not text.strip():
        return "empty"
    refuses = cannot(text)
    if kind(question) == "need":
        return "cannot" if refuses else "CLAIMS"
    if kind(question) == "self":
        return "refused" if refuses else "translated"
    return "REFUSED" if refuses else "answered"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--styles", default="plain,app", help=f"tuning instruction styles ({', '.join(TUNING_STYLES)})")
    parser.add_argument("--max-tokens", type=int, default=40, help="cut replies at this many tokens")
    parser.add_argument("--every", type=int, default=1, help="every n-th tuning question only (a loaded box)")
    parser.add_argument("--offset", type=int, default=0, help="with --every: start at this question (0-based)")
    args = parser.parse_args()
    questions = TUNING[args.offset :: args.every]
    llm: Any = load_engine()
    llm.decision_budget_share = 0.0  # every decision starves: "auto" answers in words
    decode_line(llm)
    table = []
    for style in args.styles.split(","):
        print(f"\ntuning / {style}\n{'question':<50} {'verdict':<10} {'s':>5}  reply", flush=True)
        counts: dict[str, int] = {}
        outcomes = []
        for q in questions:
            out = run_direct(llm, [q], TUNING_STYLES[style], args.max_tokens, decide_only=False)[0]
            outcomes.append(out)
            said = f"[called {out.called}] " if out.called else ""
            word = verdict(q, out.text) if not out.called else "called"
            counts[word] = counts.get(word, 0) + 1
            print(f"{q.prompt[:49]:<50} {word:<10} {out.seconds:5.2f}  {said}{out.text!r}", flush=True)
        needs = sum(kind(q) == "need" for q in questions)
        selfs = sum(kind(q) == "self" for q in questions)
        knowledge = sum(kind(q) == "knowledge" for q in questions)
        recited = sum(recites_tools(q, o.text) for q, o in zip(questions, outcomes, strict=True) if not o.called)
        seconds = statistics.median(o.seconds for o in outcomes)
        table.append(
            f"| {style} | {counts.get('CLAIMS', 0)}/{needs} | {counts.get('cannot', 0)}/{needs} "
            f"| {counts.get('translated', 0)} / {counts.get('refused', 0)} of {selfs} "
            f"| {counts.get('answered', 0)}/{knowledge} | {counts.get('REFUSED', 0)}/{knowledge} "
            f"| {counts.get('empty', 0)} | {counts.get('called', 0)} | {recited} | {seconds:.2f} |"
        )
    print(
        "\n| tuning / instructions | needs: claims done or states data | needs: says it cannot "
        "| translations: translated / refused | knowledge answered | knowledge refused | empty | calls "
        "| reciting tool text | median s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
