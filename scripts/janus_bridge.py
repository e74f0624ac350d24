"""The bridge controller of a Janus SIP-to-WebRTC bridge in front of the gateway: SIP calls that
Janus's SIP plugin (``janus.plugin.sip``) receives become WebRTC calls of the gateway.

    phone / PBX ──SIP, RTP──► Janus (SIP plugin) ──WebRTC: ICE, DTLS-SRTP──► voice-gateway
                                  ▲  Janus API (HTTP, long poll)                   ▲
                                  └──────────── this controller ── POST /v1/realtime/calls (SDP)

It registers ``--user`` through Janus at ``--registrar`` (a SIP REGISTER: the PBX or proxy then
routes that user's calls to Janus), with ``--lines`` Janus handles (a master and its helpers), one
call each. When an INVITE arrives, Janus sends an ``incomingcall`` event with a JSEP offer (WebRTC
SDP of Janus: ICE, DTLS-SRTP, the caller's codecs, RFC 8829); the controller POSTs that offer to
the gateway's ``POST /v1/realtime/calls`` (``application/sdp``, ``Authorization: Bearer`` with the
API key if set; OpenAI Realtime WebRTC contract) and accepts the Janus call with the gateway's SDP
answer. Janus then relays the media itself: RTP to the phone, WebRTC to the gateway.

Hang-up, either side:

- the phone hangs up (BYE or CANCEL): Janus sends a ``hangup`` event; the controller ends the
  gateway's call (``DELETE /v1/realtime/calls/{call_id}``), which drains its unit;
- the gateway ends the call (its ``DELETE``, a watchdog, shutdown): its peer connection closes with a
  DTLS close_notify alert; Janus hangs up the WebRTC leg and sends the phone a BYE by itself.

Refusals: a gateway that answers 503 (full, busy, shutting down) gets the INVITE declined ``503``
with its ``Retry-After`` (a proxy or trunk tries the next route); an offer it cannot answer (4xx)
``488``; an INVITE without SDP ``488`` (the gateway needs the caller's offer).

Needs only Python 3.11 and aiohttp; run one per Janus, beside it:

    python scripts/janus_bridge.py --janus http://127.0.0.1:8088/janus \\
        --gateway http://127.0.0.1:8080 --user sip:agent@pbx.example.com --registrar sip:pbx.example.com

``VG_API_KEY`` (the gateway's API key), ``JANUS_API_SECRET`` (Janus's ``api_secret``, if set) and
``JANUS_SIP_SECRET`` (the SIP account's password: Janus's SIP plugin wants one even where the
registrar asks for none) come from the environment.
It exits with status 1 if the registration fails or the Janus session is lost (let the service
manager restart it). On SIGTERM it ends its gateway calls and destroys its Janus session (Janus
hangs up the phones and drops the registration), then exits 0. The recipe: docs/DEPLOYMENT.md, "Bridges".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import signal
import sys
from dataclasses import dataclass
from typing import Any, Optional

import aiohttp

log = logging.getLogger("janus_bridge")

SIP_PLUGIN = "janus.plugin.sip"


class JanusError(RuntimeError):
    """Janus refused a request (``janus: error``) or its session is gone."""


class JanusApi:
    """The Janus API over HTTP (Janus docs, "RESTful, HTTP API"): one session, its handles, and
    the long poll that carries every event of the session."""

    def __init__(self, http: aiohttp.ClientSession, url: str, api_secret: str = "") -> None:
        self.http = http
        self.url = url.rstrip("/")
        self.api_secret = api_secret
        self.session_id = 0

    async def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, "transaction": secrets.token_hex(6)}
        if self.api_secret:
            body["apisecret"] = self.api_secret
        async with self.http.post(self.url + path, json=body) as response:
            reply: dict[str, Any] = await response.json(content_type=None)
        if reply.get("janus") == "error":
            raise JanusError(f"Janus: {reply.get('error')}")
        return reply

    async def create(self) -> None:
        """Open the Janus session."""
        self.session_id = (await self._post("", {"janus": "create"}))["data"]["id"]

    async def attach(self) -> int:
        """A new handle on the SIP plugin; its id."""
        reply = await self._post(f"/{self.session_id}", {"janus": "attach", "plugin": SIP_PLUGIN})
        return int(reply["data"]["id"])

    async def message(self, handle: int, body: dict[str, Any], jsep: Optional[dict[str, str]] = None) -> None:
        """A request to the plugin (``register``, ``accept``, ``decline``...); its outcome comes
        as an event (:meth:`events`)."""
        request: dict[str, Any] = {"janus": "message", "body": body}
        if jsep is not None:
            request["jsep"] = jsep
        await self._post(f"/{self.session_id}/{handle}", request)

    async def events(self) -> list[dict[str, Any]]:
        """The next events of the session (a long poll: up to 30 s, then a keepalive, which also
        keeps the session alive). Raises JanusError when the session is gone."""
        params = {"maxev": "10", "rid": secrets.token_hex(4)}
        if self.api_secret:
            params["apisecret"] = self.api_secret
        async with self.http.get(f"{self.url}/{self.session_id}", params=params) as response:
            reply: Any = await response.json(content_type=None)
        batch = reply if isinstance(reply, list) else [reply]
        for event in batch:
            if event.get("janus") == "error":
                raise JanusError(f"Janus session lost: {event.get('error')}")
        return [event for event in batch if event.get("janus") != "keepalive"]

    async def destroy(self) -> None:
        await self._post(f"/{self.session_id}", {"janus": "destroy"})


@dataclass
class Line:
    """One Janus handle and the gateway call it carries (``call_id``; None when idle)."""

    handle: int
    call_id: Optional[str] = None
    sip_call_id: str = ""
    answering: bool = False
    ended: bool = False  # the SIP side ended while the gateway was still answering


class Gateway:
    """The gateway's WebRTC door: ``POST /v1/realtime/calls`` and ``DELETE /v1/realtime/calls/{id}``."""

    def __init__(self, http: aiohttp.ClientSession, url: str, api_key: str = "") -> None:
        self.http = http
        self.url = url.rstrip("/")
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def open_call(self, offer: str) -> tuple[int, str, dict[str, str]]:
        """POST the SDP offer: (HTTP status, body: the SDP answer on 201, headers)."""
        headers = {**self.headers, "Content-Type": "application/sdp"}
        async with self.http.post(f"{self.url}/v1/realtime/calls", data=offer, headers=headers) as response:
            return response.status, await response.text(), dict(response.headers)

    async def hang_up(self, call_id: str) -> int:
        """DELETE the call: 200, or 404 when the gateway has ended it already."""
        async with self.http.delete(f"{self.url}/v1/realtime/calls/{call_id}", headers=self.headers) as response:
            return response.status


class JanusBridge:
    """Registers the SIP user through Janus and bridges each incoming call to the gateway."""

    def __init__(self, janus: JanusApi, gateway: Gateway, register: dict[str, Any], lines: int) -> None:
        self.janus = janus
        self.gateway = gateway
        self.register = register
        self.line_count = lines
        self.lines: dict[int, Line] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Open the session, register the master line, add the helper lines. Raises JanusError
        if the registrar refuses the registration."""
        await self.janus.create()
        master = await self.janus.attach()
        self.lines[master] = Line(master)
        await self.janus.message(master, {"request": "register", **self.register})
        registered = await self._registered(master)
        for _ in range(self.line_count - 1):
            helper = await self.janus.attach()
            self.lines[helper] = Line(helper)
            body = {"request": "register", "type": "helper", "username": self.register["username"]}
            await self.janus.message(helper, {**body, "master_id": registered["master_id"]})
            await self._registered(helper)
        log.info("registered %s with %d line(s)", self.register["username"], self.line_count)

    async def _registered(self, handle: int) -> dict[str, Any]:
        while True:
            for event in await self.janus.events():
                if event.get("sender") != handle:
                    continue
                result = _sip_result(event) or {}
                if result.get("event") == "registered":
                    return result
                if result.get("event") == "registration_failed" or "error" in _plugin_data(event):
                    raise JanusError(f"registration failed: {result or _plugin_data(event)}")

    async def serve(self) -> None:
        """:meth:`start`, then handle the session's events until it is lost (raises JanusError)."""
        await self.start()
        while True:
            for event in await self.janus.events():
                self._on_event(event)

    async def stop(self) -> None:
        """End the gateway calls in progress and destroy the Janus session: Janus hangs up the
        phones' calls (BYE) and drops the registration. Errors are logged, not raised."""
        for task in list(self._tasks):
            task.cancel()
        calls = [line.call_id for line in self.lines.values() if line.call_id is not None]
        for call_id in calls:
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                await self._hang_up(call_id)
        if self.janus.session_id:
            try:
                await self.janus.destroy()
            except (TimeoutError, JanusError, aiohttp.ClientError) as exc:
                log.warning("Janus session not destroyed: %s", exc)

    def _on_event(self, event: dict[str, Any]) -> None:
        line = self.lines.get(int(event.get("sender", 0)))
        if line is None:
            return
        if event.get("janus") == "hangup":  # the WebRTC leg closed; Janus sends the phone a BYE
            log.info("line %d: WebRTC leg closed (%s)", line.handle, event.get("reason"))
            return
        result = _sip_result(event)
        if result is None:
            if "error" in _plugin_data(event):
                log.warning("line %d: %s", line.handle, _plugin_data(event)["error"])
            return
        kind = result.get("event")
        if kind == "incomingcall":
            line.sip_call_id = str(_plugin_data(event).get("call_id", ""))
            line.answering, line.ended = True, False  # until the gateway answers: a hang-up now is kept
            log.info("line %d: call %s from %s", line.handle, line.sip_call_id, result.get("username"))
            self._spawn(self._answer(line, event.get("jsep")))
        elif kind == "hangup":
            log.info("line %d: SIP call ended (%s %s)", line.handle, result.get("code"), result.get("reason"))
            if line.answering:
                line.ended = True
            elif line.call_id is not None:
                self._spawn(self._hang_up(line.call_id))
            line.call_id = None

    async def _answer(self, line: Line, jsep: Optional[dict[str, Any]]) -> None:
        if not jsep or jsep.get("type") != "offer":
            line.answering = False
            await self.janus.message(line.handle, {"request": "decline", "code": 488})
            return
        try:
            status, answer, headers = await self.gateway.open_call(jsep["sdp"])
        except aiohttp.ClientError as exc:
            status, answer, headers = 503, str(exc), {}
        finally:
            line.answering = False
        if status != 201:
            log.warning("line %d: the gateway answered %d: %s", line.handle, status, answer[:200])
            retry = {"Retry-After": headers["Retry-After"]} if "Retry-After" in headers else {}
            decline = {"request": "decline", "code": 503 if status == 503 else 488, "headers": retry}
            await self.janus.message(line.handle, decline)
            return
        call_id = headers.get("Location", "").rsplit("/", 1)[-1]
        if line.ended:  # the caller left while the gateway answered
            await self._hang_up(call_id)
            return
        line.call_id = call_id
        log.info("line %d: call %s is gateway call %s", line.handle, line.sip_call_id, call_id)
        await self.janus.message(line.handle, {"request": "accept"}, {"type": "answer", "sdp": answer})

    async def _hang_up(self, call_id: str) -> None:
        status = await self.gateway.hang_up(call_id)
        log.info("gateway call %s hung up (%d)", call_id, status)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("call handling failed", exc_info=task.exception())


def _plugin_data(event: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = event.get("plugindata", {}).get("data", {})
    return data


def _sip_result(event: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The ``result`` of a SIP plugin event (``{"sip": "event", "result": {"event": ...}}``)."""
    data = _plugin_data(event)
    result = data.get("result") if data.get("sip") == "event" else None
    return result if isinstance(result, dict) else None


def _arguments(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--janus", default="http://127.0.0.1:8088/janus", help="Janus API URL (HTTP transport)")
    parser.add_argument("--gateway", default="http://127.0.0.1:8080", help="the gateway's base URL")
    parser.add_argument("--user", required=True, help="SIP URI Janus registers, e.g. sip:agent@pbx.example.com")
    parser.add_argument("--registrar", default="", help="SIP URI of the registrar (default: the user's domain)")
    parser.add_argument("--authuser", default="", help="SIP authentication user, if not the user's")
    parser.add_argument("--register-ttl", type=int, default=3600, help="registration lifetime, s")
    parser.add_argument("--lines", type=int, default=4, help="calls at once (Janus handles: a master and helpers)")
    return parser.parse_args(argv)


async def main(argv: Optional[list[str]] = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    register: dict[str, Any] = {"username": args.user, "register_ttl": args.register_ttl}
    for key, value in (
        ("proxy", args.registrar),
        ("authuser", args.authuser),
        ("secret", os.environ.get("JANUS_SIP_SECRET", "")),
    ):
        if value:
            register[key] = value
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        janus = JanusApi(http, args.janus, os.environ.get("JANUS_API_SECRET", ""))
        gateway = Gateway(http, args.gateway, os.environ.get("VG_API_KEY", ""))
        bridge = JanusBridge(janus, gateway, register, max(1, args.lines))
        try:
            await _until_signalled(bridge.serve())
        except (JanusError, aiohttp.ClientError) as exc:
            log.error("%s", exc)
            return 1
        finally:
            await bridge.stop()
    return 0


async def _until_signalled(work: Any) -> None:
    """Run ``work`` until it ends or SIGTERM / SIGINT comes (then cancelled, no error)."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        log.info("stopping")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
