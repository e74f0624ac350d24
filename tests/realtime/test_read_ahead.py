"""The session side of reading a reply's prompt ahead: a transcript drafted at the caller's pause
asks the pipeline to read exactly the prompt the turn's response then asks for, sends the client
nothing, and is not asked for when the turn would not start a response; ``response.done`` usage
carries the engine's input and cached tokens."""

from __future__ import annotations

from gateway.models.base import FunctionTool
from gateway.pipeline import events as pe
from tests.realtime.harness import (
    SID,
    Harness,
    answered,
    client,
    committed,
    manual_turns,
    responding,
    speech_started,
    speech_stopped,
    transcribed,
)


def drafted(text: str):
    return lambda h: pe.TranscriptDrafted(SID, transcript=text)


def test_the_prompt_read_ahead_is_the_one_the_turn_then_asks_for() -> None:
    h = Harness()
    weather = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    h.run(client("session.update", session={"type": "realtime", "tools": [weather]}))
    answered(h)  # a first exchange: the read-ahead's prompt holds the conversation so far
    h.run(speech_started(4000))
    assert h.run(drafted("And what about Spain?")) == [], "a draft is never sent to the client"
    assert len(h.pipeline.read_aheads) == 1
    messages, max_tokens, tools, choice = h.pipeline.read_aheads[0]
    assert max_tokens is None and [t.name for t in tools] == ["get_weather"] and choice == "auto"
    assert [(m.role, m.content) for m in messages[1:]] == [
        ("user", "What is the capital of France?"),
        ("assistant", "Paris is the capital."),
        ("user", "And what about Spain?"),
    ]
    h.run(speech_stopped(5600))
    h.run(committed())
    h.run(transcribed("And what about Spain?"))
    asked, _, _ = h.pipeline.requests[-1]
    assert asked == messages, "the response asks for exactly the prompt read ahead"
    assert h.pipeline.tool_requests[-1] == (tools, choice)
    assert all(isinstance(t, FunctionTool) for t in tools)


def test_no_read_ahead_when_the_turn_would_not_start_a_response() -> None:
    manual = Harness()
    manual_turns(manual)
    manual.run(drafted("Hello there."))
    assert manual.pipeline.read_aheads == [], "manual turns: the client decides when to answer"

    busy = Harness()
    responding(busy)  # a response in progress: the turn's transcript does not start another now
    busy.run(drafted("Hello there."))
    assert busy.pipeline.read_aheads == []

    quiet = Harness()
    quiet.run(
        client(
            "session.update",
            session={
                "type": "realtime",
                "audio": {"input": {"turn_detection": {"type": "server_vad", "create_response": False}}},
            },
        )
    )
    quiet.run(drafted("Hello there."))
    assert quiet.pipeline.read_aheads == []


def test_response_usage_counts_input_and_cached_tokens() -> None:
    h = Harness()
    responding(h)

    def done_with_usage(h: Harness) -> pe.ResponseFinished:
        h.pipeline.live = False
        return pe.ResponseFinished(
            SID, generation=h.pipeline.generation, text="Paris.", output_tokens=3, input_tokens=90, cached_tokens=89
        )

    h.run(done_with_usage)
    usage = h.last("response.done")["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (90, 3, 93)
    assert usage["input_token_details"]["cached_tokens"] == 89
    assert usage["input_token_details"]["cached_tokens_details"]["text_tokens"] == 89
