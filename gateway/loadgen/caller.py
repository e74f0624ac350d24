"""One simulated caller: a real WebRTC call (aiortc, ``gateway.client.RealtimeClient``; or a Realtime
WebSocket, ``gateway.loadgen.ws_client``) that asks its questions one after another, listens to
each answer to its end, thinks, and hangs up.

Voice-to-voice of a turn is the caller's own: the end of its speech (the last sample of the
recording sent, less its trailing silence) to the first voiced frame of the answer heard (the
first frame over the level of silence from 0.5 s before the gateway's ``output_audio_buffer.started``
on; a thinking cue before it is not the answer). The gateway's own stage times of the turn come
from its ``gateway.latency`` event. A refused offer records its HTTP status, error code and
``Retry-After``, and how long the refusal took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from gateway.client import RealtimeClient
from gateway.loadgen.mixups import mixup
from gateway.loadgen.speech import Question
from gateway.loadgen.turns import CallClient, event_for, final_turn_response, voiced_since
from gateway.loadgen.ws_client import WebSocketCaller

# The most a turn may take from the end of the question to its answer done, s (then it counts as failed).
TURN_TIMEOUT_S = 90.0
# The most an answer may take to play out once it started, s.
LISTEN_TIMEOUT_S = 120.0


@dataclass
class TurnResult:
    """One question and its answer: ``v2v_ms`` (None when unanswered: ``failed`` says why), the
    gateway's stage times (``stages``, ms, its ``gateway.latency`` keys), what the gateway heard
    and said, the answer's audio duration (``reply_s``: playback start to stop), when the
    question started (``at_s``, s since the run began), where the gateway's time went
    (``detail``, ms: its ``gateway.latency`` ``detail_ms``) and the reply's tokens (``tokens``:
    ``output``, ``prompt`` read, ``cached`` of the prompt; from ``response.usage``) and ``mixed``:
    what of the turn belongs to another question ("" when nothing: :func:`gateway.loadgen.mixups.mixup`)."""

    caller: int
    turn: int
    question: str
    at_s: float
    v2v_ms: Optional[float] = None
    stages: dict[str, Optional[float]] = field(default_factory=dict)
    status: str = ""
    heard: str = ""
    said: str = ""
    reply_s: Optional[float] = None
    failed: str = ""
    detail: dict[str, Optional[float]] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    mixed: str = ""


@dataclass
class CallResult:
    """One caller: the offer's HTTP ``status`` (201: answered), for a refusal its error ``code``,
    ``message`` (why: e.g. which admission rule refused) and ``retry_after`` (the header, s),
    ``offer_ms`` (the offer's round trip), its turns and its ``log``: every input transcript and
    reply of the call in order (``t`` s since the run began, ``kind`` ``heard`` or ``said``,
    ``id``: the item or response, ``status`` of a reply, ``text``)."""

    caller: int
    status: int = 0
    code: str = ""
    message: str = ""
    retry_after: Optional[str] = None
    offer_ms: Optional[float] = None
    turns: list[TurnResult] = field(default_factory=list)
    error: str = ""
    log: list[dict[str, Any]] = field(default_factory=list)

    @property
    def refused(self) -> bool:
        return self.status != 201


async def converse(
    url: str,
    caller: int,
    questions: Sequence[Question],
    think_s: float,
    t0: float,
    session: Optional[dict] = None,
    headers: Optional[dict[str, str]] = None,
    silent_s: float = 0.0,
    texts: Optional[Mapping[str, str]] = None,
    transport: str = "webrtc",
) -> CallResult:
    """Caller number ``caller`` calls ``url``, says nothing for ``silent_s``, asks ``questions`` in
    order (each after the previous answer played out and ``think_s`` s of thought) and hangs up.
    ``t0``: the run's start (time.monotonic()), for ``TurnResult.at_s``; ``session``: a
    ``session.update`` to send first; ``headers``: sent with the offer (``Authorization`` for a
    gateway with an API key); ``texts``: the transcript of every recording of the run by name, to
    check each turn against (:func:`gateway.loadgen.mixups.mixup`); ``transport``: ``webrtc`` (a
    WebRTC call) or ``websocket`` (the Realtime WebSocket, :class:`WebSocketCaller`)."""
    result = CallResult(caller)
    client: CallClient = WebSocketCaller(url) if transport == "websocket" else RealtimeClient(url)
    try:
        result.status = await client.connect(session=session, headers=headers)
    except (OSError, TimeoutError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
        await client.close()
        return result
    result.offer_ms = client.answer_s * 1000 if client.answer_s is not None else None
    if result.status != 201:
        result.retry_after = client.retry_after
        with contextlib.suppress(ValueError, KeyError, TypeError):
            error = json.loads(client.error_body or "")["error"]
            result.code, result.message = error["code"], str(error.get("message") or "")
        await client.close()
        return result
    try:
        await asyncio.sleep(0.3 + silent_s)
        for number, question in enumerate(questions):
            turn = await ask(client, caller, number, question, t0)
            turn.mixed = mixup(turn.heard, turn.said, [q.name for q in questions[: number + 1]], texts or {})
            result.turns.append(turn)
            if turn.failed:
                break  # the call is in an unknown state: the rest of its turns would not say more
            await asyncio.sleep(think_s)
    finally:
        result.log = call_log(client, t0)
        await client.hangup()
    return result


def call_log(client: CallClient, t0: float) -> list[dict[str, Any]]:
    """The call's input transcripts and replies in the order they came (see ``CallResult.log``)."""
    log: list[dict[str, Any]] = []
    for event in list(client.events):
        kind = event.get("type")
        if kind == "conversation.item.input_audio_transcription.completed":
            entry = {"kind": "heard", "id": event.get("item_id"), "text": event.get("transcript", "")}
        elif kind == "response.done":
            response = event["response"]
            entry = {"kind": "said", "id": response["id"], "status": response["status"], "text": _transcript(response)}
        else:
            continue
        log.append({"t": round(client.time_of(event) - t0, 2), **entry})
    return log


async def ask(client: CallClient, caller: int, number: int, question: Question, t0: float) -> TurnResult:
    """Speak ``question``, measure the answer's voice-to-voice and listen to the answer's end."""
    turn = TurnResult(caller, number, question.name, time.monotonic() - t0)
    mark = len(client.events)
    client.say(question.samples)
    try:
        done = await final_turn_response(client, question.tail_s, after=mark, timeout=TURN_TIMEOUT_S)
    except RuntimeError as exc:
        statuses = [d["response"]["status"] for d in client.of_type("response.done", mark)]
        errors = [e.get("error", {}).get("code") for e in client.of_type("error", mark)]
        turn.failed = f"{exc} (responses {statuses}, errors {errors})"
        return turn
    response = done["response"]
    turn.status = response["status"]
    turn.said = _transcript(response)
    heard = client.of_type("conversation.item.input_audio_transcription.completed", mark)
    turn.heard = " ".join(t["transcript"].strip() for t in heard if t["transcript"].strip())
    turn.tokens = _tokens(response)
    with contextlib.suppress(RuntimeError):
        measured = await event_for(client, "gateway.latency", response["id"])
        turn.stages = dict(measured["latency_ms"])
        turn.detail = dict(measured.get("detail_ms") or {})
    try:
        begun = await event_for(client, "output_audio_buffer.started", response["id"])
    except RuntimeError:
        turn.failed = "the answer was never played"
        return turn
    spoke_until = client.mic.finished_at - question.tail_s if client.mic.finished_at else None
    voiced = await voiced_since(client, client.time_of(begun) - 0.5)
    if voiced and spoke_until is not None:
        turn.v2v_ms = (voiced[0] - spoke_until) * 1000
    with contextlib.suppress(RuntimeError):
        stopped = await _played_out(client, response["id"])
        turn.reply_s = client.time_of(stopped) - client.time_of(begun)
    return turn


async def _played_out(client: CallClient, response_id: str) -> dict[str, Any]:
    """The answer's ``output_audio_buffer.stopped`` (or ``.cleared``) once its audio has played."""
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        for kind in ("output_audio_buffer.stopped", "output_audio_buffer.cleared"):
            found = [e for e in client.of_type(kind) if e.get("response_id") == response_id]
            if found:
                return found[0]
        await asyncio.sleep(0.05)
    raise RuntimeError(f"the answer {response_id} did not play out")


def _tokens(response: dict[str, Any]) -> dict[str, int]:
    """``output``, ``prompt`` and ``cached`` tokens of a response's ``usage`` ({} without one)."""
    usage = response.get("usage") or {}
    if not usage:
        return {}
    cached = int((usage.get("input_token_details") or {}).get("cached_tokens") or 0)
    return {
        "output": int(usage.get("output_tokens") or 0),
        "prompt": int(usage.get("input_tokens") or 0),
        "cached": cached,
    }


def _transcript(response: dict[str, Any]) -> str:
    for item in response.get("output") or []:
        for part in item.get("content") or []:
            if part.get("transcript"):
                return str(part["transcript"])
    return ""
