"""Chat LLM behind any OpenAI-compatible Chat Completions server, streamed over HTTP (SSE).

For an LLM on a GPU box or a cluster: vLLM, SGLang, TGI, Ollama, LM Studio, ``llama-cpp-python``'s
``python -m llama_cpp.server``. One ``POST {base_url}/chat/completions`` per response with
``stream: true``; the reply arrives as Server-Sent Events, one ``data: {chat.completion.chunk}``
per piece and ``data: [DONE]`` at the end (OpenAI API reference, "Create chat completion",
streaming). Tools go as ``tools``/``tool_choice``; streamed ``delta.tool_calls`` pieces are joined
by ``index`` into whole calls.

The HTTP client (the ``openai`` package's ``AsyncOpenAI``) runs on an event loop thread of its
own; ``generate`` hands text to ``on_text`` on the calling thread and polls ``should_stop`` every
20 ms, so a cancelled response closes its connection at once (the server sees the client go and
can stop generating). No response ever hangs: connecting is bounded by ``connect_timeout_s``, each read of the stream by
``read_timeout_s``, and the whole response by the compute budget; the first two raise
LanguageModelError, which the LLM stage reports to the caller as an ``error`` event.

Requests are admitted in FIFO order by an :class:`~gateway.models.compute.engine_queue.EngineQueue` with
``concurrency`` slots (0: no limit, the server does its own batching).
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import openai

from gateway.models.base import TOOL_CHOICES, ChatMessage, Generation, GenerationOptions, LanguageModelError, ToolCall
from gateway.models.compute.engine_queue import EngineQueue
from gateway.models.openai_http.client import Endpoint
from gateway.models.tool_calls import allowed_tools, check_tool_choice, new_call_id, tools_for_request
from gateway.models.weights import served

_POLL_S = 0.02
_END = object()
_FINISH = {"stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls"}


def chat_message(message: ChatMessage) -> dict[str, Any]:
    """``message`` in the Chat Completions request shape."""
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content}
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return out


class OpenAIHttpLanguageModel:
    """Streaming chat completions from ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``).

    ``model`` is the name the server serves; ``api_key`` is sent as ``Authorization: Bearer`` when
    set. ``temperature``/``top_p``/``budget_s`` are the defaults for requests that leave them None.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        api_key: str = "",
        connect_timeout_s: float = 5.0,
        read_timeout_s: float = 30.0,
        concurrency: int = 0,
        temperature: float = 0.0,
        top_p: float = 1.0,
        budget_s: float = 30.0,
    ) -> None:
        self.name = model
        self.endpoint = Endpoint("LLM", base_url, api_key, connect_timeout_s, read_timeout_s)
        self.base_url = self.endpoint.base_url
        self.weights = served(model, self.base_url)
        self.queue = EngineQueue(slots=concurrency)
        self._defaults = GenerationOptions(temperature=temperature, top_p=top_p, budget_s=budget_s)
        self._loop = asyncio.new_event_loop()
        self._client: Optional[openai.AsyncOpenAI] = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="llm-http", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Close the connection pool and stop the client's event loop thread."""
        if self._client is not None:
            asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def request_body(self, messages: list[ChatMessage], max_tokens: int, options: GenerationOptions) -> dict[str, Any]:
        """The JSON body of the streamed Chat Completions request (the arguments of the client's
        ``create``: ``extra_body`` holds fields outside OpenAI's, ``min_tokens`` of a retried reply)."""
        body: dict[str, Any] = {
            "model": self.name,
            "messages": [chat_message(m) for m in messages],
            "max_tokens": max_tokens,
            "stream": True,
            "temperature": options.temperature if options.temperature is not None else self._defaults.temperature,
            "top_p": options.top_p if options.top_p is not None else self._defaults.top_p,
        }
        if options.seed is not None:
            body["seed"] = options.seed
        if options.min_tokens > 0:  # no end before it: vLLM, SGLang and llama_cpp.server take min_tokens
            body["extra_body"] = {"min_tokens": options.min_tokens}
        if options.tools and allowed_tools(options.tools, options.tool_choice):
            body["tools"] = tools_for_request(options.tools)
            choice = options.tool_choice
            named = {"type": "function", "function": {"name": choice}}
            body["tool_choice"] = choice if choice in TOOL_CHOICES else named
        return body

    def generate(
        self,
        messages: list[ChatMessage],
        max_tokens: int,
        should_stop: Callable[[], bool],
        on_text: Callable[[str], None],
        options: Optional[GenerationOptions] = None,
    ) -> Generation:
        """Stream one reply; text pieces go to ``on_text`` on this thread.

        Raises LanguageModelError when the server cannot be reached within ``connect_timeout_s``,
        sends nothing for ``read_timeout_s``, answers with an HTTP error, or breaks the stream.
        """
        options = options or GenerationOptions()
        try:
            check_tool_choice(options.tools, options.tool_choice)
        except ValueError as exc:
            raise LanguageModelError(str(exc)) from None
        body = self.request_body(messages, max_tokens, options)
        budget = options.budget_s if options.budget_s is not None else self._defaults.budget_s
        with self.queue.turn(should_stop) as turn:
            if turn is None:
                return Generation("", 0, "cancelled")
            deadline = turn.started + budget if budget and budget > 0 else float("inf")
            result = self._consume(body, should_stop, on_text, deadline)
            result.queue_wait_s = turn.waited_s
            return result

    def _consume(
        self, body: dict[str, Any], should_stop: Callable[[], bool], on_text: Callable[[str], None], deadline: float
    ) -> Generation:
        events: queue.Queue[Any] = queue.Queue()
        future = asyncio.run_coroutine_threadsafe(self._stream(body, events), self._loop)
        text, tokens, finish = "", 0, "stop"
        calls: dict[int, dict[str, str]] = {}
        usage: dict[str, Any] = {}
        try:
            while True:
                try:
                    item = events.get(timeout=_POLL_S)
                except queue.Empty:
                    if should_stop():
                        finish = "cancelled"
                        break
                    if time.monotonic() > deadline:
                        finish = "budget"
                        break
                    continue
                if item is _END:
                    break
                if isinstance(item, BaseException):
                    raise item
                kind, value = item
                if kind == "text":
                    text += value
                    tokens += 1
                    if not should_stop():
                        on_text(value)
                elif kind == "tool":
                    _merge_call_delta(calls, value)
                elif kind == "finish":
                    finish = _FINISH.get(value, "stop")
                elif kind == "usage":
                    usage = value
                if should_stop():
                    finish = "cancelled"
                    break
        finally:
            future.cancel()  # closes the response (and its connection) if it is still open
        tokens = int(usage.get("completion_tokens", tokens) or tokens)
        result = Generation(text, tokens, finish, prompt_tokens=int(usage.get("prompt_tokens", 0) or 0))
        if calls and finish not in ("cancelled", "length", "budget"):  # a call cut short is no call
            result.tool_calls = [whole_call(c) for _, c in sorted(calls.items())]
            result.finish_reason = "tool_calls"
        return result

    async def _stream(self, body: dict[str, Any], events: queue.Queue[Any]) -> None:
        """Post ``body`` and put ("text"|"tool"|"finish"|"usage", value) items, then _END (or the
        LanguageModelError that ended it) on ``events``."""
        try:
            if self._client is None:  # made on this loop, where its connection pool lives
                self._client = self.endpoint.async_client()
            stream = await self._client.chat.completions.create(**body)
            try:
                async for chunk in stream:
                    _put_chunk(chunk.model_dump(exclude_none=True), events)
            finally:
                await stream.close()  # also on cancel: the server sees the connection go
            events.put(_END)
        except asyncio.CancelledError:
            raise
        except LanguageModelError as exc:
            events.put(exc)
        except (openai.OpenAIError, ValueError) as exc:
            events.put(LanguageModelError(self.endpoint.failure(exc, "/chat/completions")))


def _put_chunk(chunk: dict[str, Any], events: queue.Queue[Any]) -> None:
    if chunk.get("error"):
        raise LanguageModelError(f"LLM server error: {chunk['error']}")
    if chunk.get("usage"):
        events.put(("usage", chunk["usage"]))
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content"):
            events.put(("text", delta["content"]))
        for call in delta.get("tool_calls") or []:
            events.put(("tool", call))
        if choice.get("finish_reason"):
            events.put(("finish", choice["finish_reason"]))


def whole_call(streamed: dict[str, str]) -> ToolCall:
    """The ToolCall of a call streamed to its end (``_merge_call_delta``'s entry). Raises
    LanguageModelError when it has no name or its arguments are not one JSON object: a call with
    broken arguments is never handed on (the server's ``length`` or the budget cut it, or the server
    constrains no arguments)."""
    name, arguments = streamed.get("name", ""), streamed.get("arguments", "") or "{}"
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    if not name or not isinstance(parsed, dict):
        raise LanguageModelError(f"the LLM server sent no valid tool call: {name!r} with arguments {arguments!r}")
    return ToolCall(streamed.get("id") or new_call_id(), name, arguments)


def _merge_call_delta(calls: dict[int, dict[str, str]], delta: dict[str, Any]) -> None:
    """Join one streamed ``tool_calls`` delta into ``calls`` (by ``index``): the id and name come
    once, ``function.arguments`` arrives in pieces to concatenate."""
    entry = calls.setdefault(int(delta.get("index", 0) or 0), {})
    if delta.get("id"):
        entry["id"] = delta["id"]
    function = delta.get("function") or {}
    if function.get("name"):
        entry["name"] = entry.get("name", "") + function["name"]
    if function.get("arguments"):
        entry["arguments"] = entry.get("arguments", "") + function["arguments"]
