"""How a reply that did not simply complete says so in ``response.done``, within what OpenAI's types
(and an SDK that validates events against them) accept. A reply the LLM ends with no words (the
caller would hear silence): logged, asked again once with its end barred, and, if still wordless,
``failed`` rather than ``completed``. A reply cut by the turn's compute budget: ``incomplete`` with no
``reason`` (OpenAI's reasons are a token cap or a content filter; the budget is neither). Real
WebSocket calls on loopback with the real models, but for a language model double that ends its
replies at once (``EndsAtOnceLanguageModelDouble``: the empty reply is what these tests are about;
the retry it lets through is the real model's) or gives the real one a tight budget."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from pydantic import TypeAdapter

from gateway.models.base import ModelSet
from tests.doubles import EndsAtOnceLanguageModelDouble, TightBudgetLanguageModelDouble
from tests.helpers import serve
from tests.transports.websocket.ws_client import EventClient


def validate(event: dict) -> None:
    """``event`` as an SDK that validates server events reads it (openai-agents does, with these types)."""
    from openai.types.realtime import RealtimeServerEvent

    TypeAdapter(RealtimeServerEvent).validate_python(event)


@pytest.mark.slow  # a real call or generation of several seconds (the default suite is at its bar)
async def test_a_reply_that_ends_at_once_is_asked_again_with_its_end_barred(models: ModelSet, gateway_config, caplog):
    """Failed before: the reply ended at once "completed" with no words and no warning; the caller
    heard nothing."""
    llm = EndsAtOnceLanguageModelDouble(models.llm)
    async with serve(gateway_config(), dataclasses.replace(models, llm=llm)) as (url, _app):
        with caplog.at_level(logging.WARNING):
            async with EventClient(url) as client:
                created = await client.wait_for("session.created", timeout=10)
                mark = await client.ask("What is the capital of France?")
                done = (await client.wait_for("response.done", timeout=90, after=mark))["response"]
    transcript = done["output"][0]["content"][0]["transcript"]
    assert done["status"] == "completed" and "paris" in transcript.lower(), (done, llm.asked)
    assert llm.asked[0] == 0 and llm.asked[-1] > 0, "asked again once, its end barred"
    assert len(llm.asked) == 2
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "no words" in r.getMessage()]
    item = done["output"][0]["id"]
    assert any(created["session"]["id"] in m and item in m and "it answered" in m for m in warned), warned
    validate({"type": "response.done", "event_id": "event_1", "response": done})


@pytest.mark.slow  # a real generation of several seconds
async def test_a_retried_text_reply_reads_as_the_retry_alone(models: ModelSet, gateway_config, caplog):
    """Failed before: the first attempt's "." had already gone out as a
    ``response.output_text.delta`` and was part of the final text too: the client read ".Paris
    is..."; and the empty first attempt logged two WARNINGs (the LLM stage's, the tracker's)."""
    llm = EndsAtOnceLanguageModelDouble(models.llm)
    async with serve(gateway_config(), dataclasses.replace(models, llm=llm)) as (url, _app):
        with caplog.at_level(logging.WARNING):
            async with EventClient(url) as client:
                await client.wait_for("session.created", timeout=10)
                mark = await client.ask(
                    "What is the capital of France?", output_modalities=["text"], max_output_tokens=16
                )
                done = (await client.wait_for("response.done", timeout=90, after=mark))["response"]
                deltas = "".join(e["delta"] for e in client.of_type("response.output_text.delta", after=mark))
                final = client.of_type("response.output_text.done", after=mark)[-1]["text"]
    text = done["output"][0]["content"][0]["text"]
    assert len(llm.asked) == 2 and done["status"] in ("completed", "incomplete"), (done, llm.asked)
    assert "paris" in text.lower() and not text.startswith("."), text
    assert deltas.strip() == text == final, (deltas, text, final)
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING and "no words" in r.getMessage()]
    assert len(warned) == 1, [r.getMessage() for r in warned]


@pytest.mark.parametrize("modality", ["audio", "text"])
async def test_a_reply_still_without_words_fails_honestly(models: ModelSet, gateway_config, caplog, modality):
    """Failed before: ``completed`` with an empty transcript. Now ``failed`` with the error code
    ``empty_response`` (a status and error every OpenAI type accepts), after one retry."""
    llm = EndsAtOnceLanguageModelDouble(models.llm, always=True)
    async with serve(gateway_config(), dataclasses.replace(models, llm=llm)) as (url, _app):
        with caplog.at_level(logging.WARNING):
            async with EventClient(url) as client:
                created = await client.wait_for("session.created", timeout=10)
                mark = await client.ask("What is the capital of France?", output_modalities=[modality])
                done = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
    assert done["status"] == "failed", done
    assert done["status_details"]["type"] == "failed"
    assert done["status_details"]["error"]["code"] == "empty_response", done["status_details"]
    assert llm.asked == [0, 4] or (len(llm.asked) == 2 and llm.asked[1] > 0), llm.asked
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "no words" in r.getMessage()]
    assert len(warned) == 1 and "nothing again: failed" in warned[0], "one WARNING names it (before: two)"
    assert created["session"]["id"] in warned[0] and done["output"][0]["id"] in warned[0], warned
    validate({"type": "response.done", "event_id": "event_1", "response": done})


async def test_a_reply_cut_by_the_turns_budget_is_no_token_cap(models: ModelSet, gateway_config):
    """Failed before: every cut reply said ``reason: max_output_tokens``, a budget cut too. A reason
    OpenAI's types do not list (``turn_budget``) would fail an SDK that validates events, so the
    budget's cut carries none; a token cap still says ``max_output_tokens``."""
    llm = TightBudgetLanguageModelDouble(models.llm, budget_s=0.3)
    async with serve(gateway_config(), dataclasses.replace(models, llm=llm)) as (url, _app):
        async with EventClient(url) as client:
            await client.wait_for("session.created", timeout=10)
            story = "Tell me a long story about a brave little dragon who learns to fly."
            mark = await client.ask(story, output_modalities=["text"])
            cut = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
            llm.budget_s = 30.0
            mark = await client.ask(story, output_modalities=["text"], max_output_tokens=3)
            capped = (await client.wait_for("response.done", timeout=60, after=mark))["response"]
    assert cut["status"] == "incomplete" and cut["status_details"] == {"type": "incomplete"}, cut
    assert capped["status"] == "incomplete", capped
    assert capped["status_details"] == {"type": "incomplete", "reason": "max_output_tokens"}
    for done in (cut, capped):
        validate({"type": "response.done", "event_id": "event_1", "response": done})
