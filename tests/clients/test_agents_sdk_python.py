"""The OpenAI Agents SDK for Python (``openai-agents``: ``RealtimeRunner`` over its
WebSocket model), unchanged, pointed at the gateway by URL: a typed turn, and a turn in which the
agent calls a function tool once and answers with its result, and an ``interrupt()`` of a spoken reply."""

from __future__ import annotations

import asyncio
import logging

import pytest
from agents import function_tool
from agents.realtime import RealtimeAgent, RealtimeRunner

from tests.helpers import app_idle, serve, wait_until

API_KEY = "sk-agents-sdk-test"


def ws_url(url: str) -> str:
    return url.replace("http://", "ws://") + "/v1/realtime?model=gpt-realtime"


def response_texts(event) -> list[str]:
    """The words of a ``response.done`` seen as the SDK's raw server event (else [])."""
    if event.type != "raw_model_event" or event.data.type != "raw_server_event":
        return []
    data = event.data.data
    if data.get("type") != "response.done":
        return []
    return response_texts_of(data["response"])


def response_texts_of(response: dict) -> list[str]:
    """The words of a ``response`` object's message items."""
    return [
        part.get("text") or part.get("transcript") or ""
        for item in response["output"]
        if item["type"] == "message"
        for part in item.get("content", [])
    ]


async def test_agents_sdk_realtime_runner_typed_turn(models, gateway_config):
    agent = RealtimeAgent(name="Assistant", instructions="Answer in one short sentence.")
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=20), models) as (url, app):
        runner = RealtimeRunner(
            agent, config={"model_settings": {"model_name": "gpt-realtime", "output_modalities": ["text"]}}
        )
        session = await runner.run(model_config={"url": ws_url(url), "api_key": API_KEY})
        kinds: list[str] = []
        answer: list[str] = []
        async with session:
            await session.send_message("Say hello.")

            async def read() -> None:
                async for event in session:
                    kinds.append(event.type)
                    assert event.type != "error", event
                    answer.extend(response_texts(event))
                    if answer:
                        return

            await asyncio.wait_for(read(), 60)
        assert " ".join(answer).strip()
        assert "agent_start" in kinds and "history_added" in kinds
        assert await wait_until(lambda: app_idle(app), 10)


async def test_agents_sdk_spoken_turn_sees_only_events_it_can_parse(models, gateway_config, caplog):
    """A spoken turn (audio out, so the gateway measures its latency): the stock SDK validates
    every server event against OpenAI's types; a gateway extension event (``gateway.latency``) is
    sent only to clients that ask for it, so this one logs no validation failure and its
    application sees no error event."""
    caplog.set_level(logging.DEBUG)
    agent = RealtimeAgent(name="Assistant", instructions="Answer in one short sentence.")
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=12), models) as (url, app):
        runner = RealtimeRunner(
            agent, config={"model_settings": {"model_name": "gpt-realtime", "output_modalities": ["audio"]}}
        )
        session = await runner.run(model_config={"url": ws_url(url), "api_key": API_KEY})
        kinds: list[str] = []
        async with session:
            await session.send_message("Say hello.")

            async def read() -> None:
                async for event in session:
                    kinds.append(event.type)
                    assert event.type != "error", event
                    if event.type == "raw_model_event" and event.data.type == "raw_server_event":
                        if event.data.data.get("type") == "response.done":
                            return

            await asyncio.wait_for(read(), 90)
            await asyncio.sleep(0.5)  # events sent right after response.done are read too
        assert "audio" in kinds, kinds
        failures = [r.getMessage() for r in caplog.records if "Failed to validate server event" in r.getMessage()]
        assert not failures, failures
        assert await wait_until(lambda: app_idle(app), 10)


@pytest.mark.slow
async def test_agents_sdk_realtime_runner_calls_a_tool_and_answers_with_it(models, gateway_config):
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        calls.append(city)
        return f"It is sunny and 21 degrees Celsius in {city}."

    agent = RealtimeAgent(
        name="Weather assistant",
        instructions="You answer questions about the weather. Always call get_weather to learn it, "
        "then answer in one short sentence.",
        tools=[get_weather],
    )
    config = gateway_config(api_key=API_KEY, max_response_tokens=48, llm_turn_budget_s=60)
    async with serve(config, models) as (url, app):
        runner = RealtimeRunner(
            agent, config={"model_settings": {"model_name": "gpt-realtime", "output_modalities": ["text"]}}
        )
        session = await runner.run(model_config={"url": ws_url(url), "api_key": API_KEY})
        seen: list = []
        answers: list[str] = []
        async with session:
            await session.send_message("What is the weather in Paris?")

            async def read() -> None:
                async for event in session:
                    seen.append(event)
                    if event.type == "error":
                        raise AssertionError(f"SDK error event: {event.error}")
                    texts = response_texts(event)
                    if calls and any(text.strip() for text in texts):
                        answers.extend(texts)
                        return
                    if len(calls) > 1:
                        return  # called again: the assertion below says so

            await asyncio.wait_for(read(), 120)
        assert calls == ["Paris"]  # the tool ran once, with the model's arguments
        kinds = [event.type for event in seen]
        assert "tool_start" in kinds and "tool_end" in kinds
        answer = " ".join(answers)
        assert "21" in answer or "sunny" in answer.lower(), answer
        assert await wait_until(lambda: app_idle(app), 10)


@pytest.mark.slow  # a real model turn
async def test_agents_sdk_interrupt_ends_the_reply_and_keeps_only_its_words_heard(models, gateway_config):
    """``session.interrupt()`` with the SDK's default server VAD (``interrupt_response``: the server
    cancels on speech, so the SDK sends no ``response.cancel``): only ``conversation.item.truncate``
    of the reply it stopped playing. The gateway paces replies in real time, so that reply was still
    going on: it ran to its end and kept the whole story in the conversation, words the user never
    heard (tests/realtime/test_truncate_during_reply.py). Now it ends there, cancelled, with no error."""
    agent = RealtimeAgent(name="Storyteller", instructions="Tell long stories.")
    async with serve(gateway_config(api_key=API_KEY, max_response_tokens=80), models) as (url, app):
        runner = RealtimeRunner(agent, config={"model_settings": {"model_name": "gpt-realtime"}})
        session = await runner.run(model_config={"url": ws_url(url), "api_key": API_KEY})
        done: list[dict] = []
        async with session:
            await session.send_message("Tell me a long story about a cat who sails across the sea.")

            async def read() -> None:
                deltas = 0
                async for event in session:
                    assert event.type != "error", event
                    if event.type != "raw_model_event" or event.data.type != "raw_server_event":
                        continue
                    data = event.data.data
                    if data["type"] == "response.output_audio.delta":
                        deltas += 1
                        if deltas == 15:  # ~1.5 s of the story sent: the user stops it
                            await session.interrupt()
                    elif data["type"] == "response.done":
                        done.append(data["response"])
                        return

            await asyncio.wait_for(read(), 90)
        assert done[0]["status"] == "cancelled", done[0]["status_details"]
        told = " ".join(response_texts_of(done[0]))
        assert len(told.split()) < 20, told  # the words sent before the interrupt, not the whole story
        assert await wait_until(lambda: app_idle(app), 10)
