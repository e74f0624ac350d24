"""The preemptive reply on a real unit and the real LLM (``gateway.pool.preemptive``): a reply started
from the turn so far at the caller's pause is held (nothing reaches the session), becomes the turn's
response when the turn ends with the same words (compared normalised), and is discarded without a
trace when the words differ or the caller goes on."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gateway.models.base import ChatMessage
from gateway.pipeline.events import PipelineEvent, ResponseFinished, ResponseTextDelta, SpeechResumed
from gateway.pool.unit import PipelineUnit
from tests.helpers import wait_until

SYSTEM = ChatMessage("system", "You are a helpful voice assistant. Answer briefly.")


def generations(events: list[PipelineEvent]) -> set[int]:
    return {g for g in (getattr(e, "generation", None) for e in events) if g is not None}


async def test_a_held_reply_becomes_the_response_to_the_same_words(models, gateway_config):
    events: list[PipelineEvent] = []
    unit = PipelineUnit(0, models, gateway_config(), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_preemptive_used", events.append)
        draft = [SYSTEM, ChatMessage("user", "What colour is the sky on a clear day?")]
        unit.read_ahead(draft, max_tokens=6, tools=[], tool_choice="none", audio=False)
        held = unit.preemptive.held
        assert held is not None, "started at the pause"
        assert await wait_until(lambda: bool(held.events), 60), "it generates while held"
        assert held.latency.llm_first_token is not None
        await asyncio.sleep(0.2)
        assert not events, "nothing of a held reply reaches the session"

        # The turn ends with the same words (Whisper wrote them another way): the reply is used.
        final = [SYSTEM, ChatMessage("user", "what colour is the sky on a clear day")]
        generation = unit.create_response(final, audio=False, max_tokens=6, tool_choice="none")
        assert generation == held.generation
        assert not events, "its kept events follow the response's own first events, never before"
        assert await wait_until(lambda: any(isinstance(e, ResponseFinished) for e in events), 60)
        assert generations(events) == {generation}
        deltas = [e for e in events if isinstance(e, ResponseTextDelta)]
        assert deltas and events.index(deltas[0]) == 0, "the text generated while held comes first, in order"
        assert unit.preemptive.counts() == {"used": 1, "discarded": 0, "skipped": 0}
    finally:
        unit.close()
        unit.join(5)


async def test_a_held_reply_to_other_words_or_a_caller_who_goes_on_leaves_no_trace(models, gateway_config):
    events: list[PipelineEvent] = []
    unit = PipelineUnit(0, models, gateway_config(), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_preemptive_discarded", events.append)
        draft = [SYSTEM, ChatMessage("user", "Name one planet.")]
        unit.read_ahead(draft, max_tokens=6, tools=[], tool_choice="none", audio=False)
        held = unit.preemptive.held
        assert held is not None
        assert await wait_until(lambda: bool(held.events), 60), "it generated text before it was discarded"

        # The final transcript differs: the held reply is discarded and the response is a new one.
        final = [SYSTEM, ChatMessage("user", "Name one planet with rings.")]
        generation = unit.create_response(final, audio=False, max_tokens=6, tool_choice="none")
        assert generation != held.generation and not unit.is_current(held.generation)
        assert await wait_until(lambda: any(isinstance(e, ResponseFinished) for e in events), 60)
        assert generations(events) == {generation}, "no event of the discarded reply"
        assert unit.preemptive.last_discarded is held

        # The caller goes on after another pause: the VAD's SpeechResumed discards it at once.
        events.clear()
        unit.read_ahead(draft, max_tokens=6, tools=[], tool_choice="none", audio=False)
        again = unit.preemptive.held
        assert again is not None
        assert await wait_until(lambda: bool(again.events), 60)
        unit.notify(SpeechResumed("rtc_preemptive_discarded"))
        assert await wait_until(lambda: unit.preemptive.held is None, 5)
        await asyncio.sleep(0.3)
        assert not generations(events), "nothing of it was sent, nothing of it comes later"
        assert not unit.is_current(again.generation)
        assert unit.preemptive.counts() == {"used": 0, "discarded": 2, "skipped": 0}
    finally:
        unit.close()
        unit.join(5)


async def test_no_reply_is_started_while_one_plays_or_when_it_is_off(models, gateway_config):
    events: list[PipelineEvent] = []
    unit = PipelineUnit(0, models, gateway_config(preemptive_reply=False), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_preemptive_off", events.append)
        draft = [SYSTEM, ChatMessage("user", "Name one ocean.")]
        unit.read_ahead(draft, max_tokens=4, tools=[], tool_choice="none", audio=False)
        assert unit.preemptive.held is None, "off: only the prompt is read ahead"
        unit.interrupt()
    finally:
        unit.close()
        unit.join(5)
    unit = PipelineUnit(0, models, gateway_config(), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_preemptive_busy", events.append)
        unit.create_response([SYSTEM, ChatMessage("user", "Count to ten.")], audio=False, max_tokens=30)
        unit.read_ahead([SYSTEM, ChatMessage("user", "Name one ocean.")], max_tokens=4, tools=[], tool_choice="none")
        assert unit.preemptive.held is None, "a reply still generating is not overtaken"
        assert unit.preemptive.counts()["skipped"] == 1
        unit.interrupt()
    finally:
        unit.close()
        unit.join(5)


async def test_a_held_reply_gives_its_place_to_another_callers_turn_and_is_then_not_used(models, gateway_config):
    """Speculative work never delays another caller's due work: a held reply holding one of the
    LLM's places stops as soon as another caller's turn waits for one, and is not used after."""
    import contextlib
    import threading

    queue = models.llm.queue
    events: list[PipelineEvent] = []
    unit = PipelineUnit(0, models, gateway_config(), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_preemptive_gives_way", events.append)
        draft = [SYSTEM, ChatMessage("user", "Tell me a long story about a lighthouse keeper.")]
        unit.read_ahead(draft, max_tokens=200, tools=[], tool_choice="none", audio=False)
        held = unit.preemptive.held
        assert held is not None
        assert await wait_until(lambda: bool(held.events), 60), "it generates, holding one place"
        got_in = threading.Event()
        with contextlib.ExitStack() as places:
            for _ in range(queue.slots - queue.load().running):  # every other place taken
                assert places.enter_context(queue.turn(lambda: False)) is not None

            def another_caller() -> None:
                with queue.turn(lambda: False) as turn:
                    assert turn is not None
                    got_in.set()

            caller = threading.Thread(target=another_caller)
            caller.start()
            assert await wait_until(got_in.is_set, 30), "the waiting turn got the held reply's place"
            caller.join(10)
        assert held.hold.gives_way() and unit.preemptive.held is held, "it gave way while still held"
        generation = unit.create_response(draft, audio=False, max_tokens=4, tool_choice="none")
        assert generation != held.generation, "a reply that gave way is not used: a new one answers"
        assert await wait_until(lambda: any(isinstance(e, ResponseFinished) for e in events), 60)
        assert generations(events) == {generation}
        assert unit.preemptive.counts() == {"used": 0, "discarded": 1, "skipped": 0}
    finally:
        unit.close()
        unit.join(5)


async def test_a_held_reply_is_not_used_once_the_client_changed_how_replies_speak(models, gateway_config):
    """A ``session.update`` of ``audio.output.speed`` (or ``voice``) while the pause's reply is held:
    the turn's response, asked after the update, speaks as the update says; the held reply, made
    with the settings of the pause, is discarded. An update that changes nothing of how replies
    speak (turn detection), or one undone before the turn's response, leaves it to be used."""
    events: list[PipelineEvent] = []
    unit = PipelineUnit(0, models, gateway_config(), asyncio.get_running_loop())
    try:
        assert unit.claim("rtc_preemptive_speed", events.append)
        draft = [SYSTEM, ChatMessage("user", "Name one planet.")]
        unit.read_ahead(draft, max_tokens=6, tools=[], tool_choice="none", audio=True)
        held = unit.preemptive.held
        assert held is not None
        settings = unit.settings
        unit.apply_settings(replace(settings, turn=replace(settings.turn, silence_duration_ms=700)))
        assert unit.preemptive.held is held, "turn detection is nothing of how the reply speaks"

        # The turn's response is what decides: a change undone before it asks uses the held reply.
        unit.apply_settings(replace(unit.settings, speed=1.5))
        unit.apply_settings(replace(unit.settings, speed=settings.speed))
        assert unit.create_response(draft, audio=True, max_tokens=6, tool_choice="none") == held.generation
        assert unit.preemptive.counts()["used"] == 1
        unit.interrupt()

        unit.read_ahead(draft, max_tokens=6, tools=[], tool_choice="none", audio=True)
        held = unit.preemptive.held
        assert held is not None
        unit.apply_settings(replace(unit.settings, speed=1.5))
        generation = unit.create_response(draft, audio=True, max_tokens=6, tool_choice="none")
        assert generation != held.generation and not unit.is_current(held.generation)
        assert unit.preemptive.last_discarded is held
        assert unit.preemptive.counts()["used"] == 1
        unit.interrupt()
    finally:
        unit.close()
        unit.join(5)
