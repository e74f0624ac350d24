"""Offers and calls at the edge: how unusable or unusual offers are answered (media directions,
refusals without a claimed unit, JSON errors for bad HTTP input), what a call gives back when it
ends or cannot be built (its unit, its ephemeral key, its output track), and what must not leak
to the next caller. Each test failed before its fix. Offers are made here with aiortc (no
third-party SDP fixtures)."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import aiohttp
import pytest
from aiortc import RTCPeerConnection
from aiortc.mediastreams import VideoStreamTrack

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL, SESSIONS
from tests.helpers import serve, wait_until


async def make_offer(*kinds: str, channel: bool = True) -> tuple[RTCPeerConnection, str]:
    """A real aiortc offer with one transceiver per kind in ``kinds`` (``"audio"``, ``"video"``)."""
    pc = RTCPeerConnection()
    for kind in kinds:
        pc.addTransceiver(VideoStreamTrack() if kind == "video" else kind, direction="sendrecv")
    if channel:
        pc.createDataChannel("oai-events")
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


def sections(sdp: str) -> list[str]:
    """The m-sections of an SDP, each from its m= line to the next."""
    return ["m=" + part for part in re.split(r"\r?\nm=", sdp)[1:]]


def all_idle(app) -> bool:
    return all(unit.state is UnitState.IDLE for unit in app[POOL].units)


async def post_sdp(http: aiohttp.ClientSession, url: str, sdp: str | bytes, **headers) -> tuple[int, str, dict]:
    headers.setdefault("Content-Type", "application/sdp")
    async with http.post(f"{url}/v1/realtime/calls", data=sdp, headers=headers) as response:
        return response.status, await response.text(), dict(response.headers)


async def test_video_and_second_audio_are_answered_inactive(models, gateway_config):
    """An audio+video offer (Chromium, Safari) used to be answered with video ``recvonly``: the
    caller's camera was received and decoded into an unbounded queue that nothing reads (memory
    and CPU grow for the length of the call). A second audio m-line had the same fate."""
    async with serve(gateway_config(pool_size=1, connect_timeout_s=3), models) as (url, app):
        pc, offer = await make_offer("audio", "video", "audio")
        async with aiohttp.ClientSession() as http:
            status, answer, headers = await post_sdp(http, url, offer)
            assert status == 201, answer
            audio, video, audio2, data = sections(answer)
            assert audio.startswith("m=audio") and "a=sendrecv" in audio
            assert video.startswith("m=video") and "a=inactive" in video, video
            assert audio2.startswith("m=audio") and "a=inactive" in audio2, audio2
            assert data.startswith("m=application")
            async with http.delete(f"{url}{headers['Location']}") as response:
                assert response.status == 200
        await pc.close()
        assert await wait_until(lambda: all_idle(app), 5)


async def test_unusable_offers_are_refused_without_claiming_a_unit(models, gateway_config):
    """Offers that parse but cannot connect used to claim a unit (and drain it) or, without a DTLS
    fingerprint, even get 201 and hold the unit until the connect watchdog fired. Now each is a
    400 naming what is missing, and no unit is claimed."""
    async with serve(gateway_config(pool_size=1, connect_timeout_s=30), models) as (url, app):
        pc, offer = await make_offer("audio")
        await pc.close()
        no_fingerprint = "\r\n".join(line for line in offer.split("\r\n") if not line.startswith("a=fingerprint"))
        no_ice = "\r\n".join(line for line in offer.split("\r\n") if not line.startswith("a=ice-pwd"))
        no_mux = "\r\n".join(line for line in offer.split("\r\n") if line != "a=rtcp-mux")
        # A SIP bridge offering G.729 only (payload 18), no codec in common.
        g729 = re.sub(r"m=audio (\d+) (\S+) .*", r"m=audio \1 \2 18", offer)
        g729 = (
            "\r\n".join(line for line in g729.split("\r\n") if not re.match(r"a=(rtpmap|fmtp|rtcp-fb):(?!18 )", line))
            + "\r\n"
        )
        g729 = g729.replace("a=mid:0", "a=mid:0\r\na=rtpmap:18 G729/8000")
        cases = {"fingerprint": no_fingerprint, "ice": no_ice, "rtcp-mux": no_mux, "codec": g729}
        async with aiohttp.ClientSession() as http:
            for name, sdp in cases.items():
                status, body, _ = await post_sdp(http, url, sdp)
                assert status == 400, (name, status, body[:300])
                error = json.loads(body)["error"]
                assert error["code"] == "invalid_offer" and name.split("-")[0] in error["message"].lower(), error
        assert app[POOL].units[0].sessions_served == 0, "a bad offer claimed (and drained) a unit"
        assert all_idle(app) and not app[SESSIONS].sessions


async def test_bad_http_input_gets_json_errors_and_the_server_lives(models, gateway_config):
    """A body that is not UTF-8, an unknown charset or a broken multipart form used to be a 500
    with a text body; a body over the size limit, an unknown route or method gave aiohttp's text
    errors. Every error is now the JSON ``{"error": {...}}`` shape clients parse."""
    config = gateway_config(pool_size=1, max_offer_bytes=4096)
    async with serve(config, models) as (url, app):
        async with aiohttp.ClientSession() as http:

            async def check(method: str, path: str, status: int, code: str, **kwargs) -> dict:
                async with http.request(method, f"{url}{path}", **kwargs) as response:
                    body = await response.text()
                    assert response.status == status, (path, response.status, body[:200])
                    assert response.content_type == "application/json", (path, body[:200])
                    error = json.loads(body)["error"]
                    assert error["code"] == code, (path, error)
                    return dict(response.headers)

            await check(
                "POST",
                "/v1/realtime/calls",
                400,
                "invalid_encoding",
                data=b"v=0\r\n\xff\xfe",
                headers={"Content-Type": "application/sdp"},
            )
            await check(
                "POST",
                "/v1/realtime/calls",
                400,
                "invalid_encoding",
                data=b"v=0\r\n",
                headers={"Content-Type": "application/sdp; charset=no-such-charset"},
            )
            await check(
                "POST",
                "/offer",
                400,
                "invalid_encoding",
                data=b'{"sdp": "\xff"}',
                headers={"Content-Type": "application/json; charset=no-such-charset"},
            )
            await check(
                "POST",
                "/v1/realtime/calls",
                400,
                "invalid_form",
                data=b"--x\r\n",
                headers={"Content-Type": "multipart/form-data"},
            )
            await check(
                "POST",
                "/v1/realtime/calls",
                413,
                "request_too_large",
                data=b"v=0\r\n" + b"a=x\r\n" * 40000,
                headers={"Content-Type": "application/sdp"},
            )
            await check("GET", "/v1/nothing-here", 404, "not_found")
            headers = await check("GET", "/v1/realtime/calls", 405, "method_not_allowed")
            assert "POST" in headers.get("Allow", "")
            async with http.get(f"{url}/healthz") as response:
                assert response.status == 200
        assert all_idle(app) and app[POOL].units[0].sessions_served == 0


async def test_pool_view_does_not_hand_out_hang_up_capabilities(models, gateway_config):
    """The unauthenticated ``GET /v1/pool`` listed every live call id, and a call id was enough to
    hang up (``DELETE /v1/realtime/calls/{id}``): anyone could end every call. The view shows a
    shortened id, which is no call even to a holder of the key; without the key a hang-up is 401."""
    async with serve(gateway_config(pool_size=1, api_key="sk-review"), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect(headers={"Authorization": "Bearer sk-review"}) == 201
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/v1/pool") as response:
                text = await response.text()
                shown = json.loads(text)["units"][0]["call_id"]
            assert client.call_id not in text
            assert shown and client.call_id.startswith(shown.rstrip("."))  # still matches the logs
            async with http.delete(f"{url}/v1/realtime/calls/{shown}") as response:
                assert response.status == 401
            key = {"Authorization": "Bearer sk-review"}
            async with http.delete(f"{url}/v1/realtime/calls/{shown}", headers=key) as response:
                assert response.status == 404
            async with http.delete(f"{url}/v1/realtime/calls/{client.call_id}") as response:
                assert response.status == 401
            assert app[POOL].units[0].state is UnitState.ACTIVE
        await client.hangup()
        assert await wait_until(lambda: all_idle(app), 5)


async def test_late_data_channel_message_does_not_reach_the_next_caller(models, gateway_config):
    """A call's data channel stays open while the call is torn down (``pc.close()`` awaits), and
    the drain can finish and the unit serve the next caller in that window. A message that
    arrived then (e.g. ``response.create``) was handled by the ended call's protocol session and
    acted on the unit's current session: the next caller got a response made from the previous
    caller's conversation."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        first = RealtimeClient(url)
        assert await first.connect() == 201
        old_call = app[SESSIONS].sessions[first.call_id].transport
        # aiortc drops a channel's listeners once it is closed: keep the one the transport calls.
        (deliver,) = old_call.channel.listeners("message")
        await first.hangup()
        assert await wait_until(lambda: all_idle(app), 5)

        second = RealtimeClient(url)
        assert await second.connect() == 201
        unit = app[POOL].units[0]
        assert unit.call_id == second.call_id
        generation = unit.scope.current
        # What the old channel's transport delivers in the window (called directly: the race is
        # timing-dependent, its effect is not).
        item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "My PIN is 4711."}]}
        deliver(json.dumps({"type": "conversation.item.create", "item": item}))
        deliver(json.dumps({"type": "response.create"}))
        await asyncio.sleep(0.2)
        assert unit.scope.current == generation and not unit.scope.live, "the old call started a response"
        await second.hangup()
        assert await wait_until(lambda: all_idle(app), 5)


async def test_offer_without_direction_like_freeswitch_is_answered(models, gateway_config):
    """RFC 8866 makes a missing direction attribute mean ``sendrecv``; FreeSWITCH (a SIP-to-WebRTC
    bridge) sends none. aiortc cannot answer such an m-line (``None is not in list``), so every
    call from such a bridge was refused with 400 (after claiming and draining a unit)."""
    async with serve(gateway_config(pool_size=1, connect_timeout_s=3), models) as (url, app):
        pc, offer = await make_offer("audio", channel=False)
        await pc.close()
        # A G.711-only leg without direction attribute, as FreeSWITCH offers it.
        offer = re.sub(r"m=audio (\d+) (\S+) .*", r"m=audio \1 \2 8", offer)
        offer = "\r\n".join(
            line
            for line in offer.split("\r\n")
            if line != "a=sendrecv" and not re.match(r"a=(rtpmap|fmtp|rtcp-fb):(?!8 )", line)
        )
        assert "a=sendrecv" not in offer and "m=audio" in offer
        async with aiohttp.ClientSession() as http:
            status, answer, headers = await post_sdp(http, url, offer)
            assert status == 201, answer
            (audio,) = sections(answer)
            assert "a=sendrecv" in audio and "PCMA/8000" in audio, audio
            async with http.delete(f"{url}{headers['Location']}") as response:
                assert response.status == 200
        assert await wait_until(lambda: all_idle(app), 5)


async def test_reply_completes_when_no_audio_goes_back(models, gateway_config):
    """A data-channel-only call (or audio offered ``sendonly``) has no outbound track reading the
    playout buffer: TTS blocked on the full buffer (30 s per piece), ``response.done`` did not
    come, and the stuck buffer counted as activity, so the idle watchdog never freed the unit.
    Reply audio is now played out to nowhere in real time."""
    from aiortc import RTCSessionDescription
    from aiortc.mediastreams import AudioStreamTrack

    async def ask(url: str, variant: str) -> None:
        pc = RTCPeerConnection()
        if variant == "sendonly":
            pc.addTransceiver(AudioStreamTrack(), direction="sendonly")
        channel = pc.createDataChannel("oai-events")
        events: list[str] = []
        channel.on("message", lambda message: events.append(json.loads(message)["type"]))
        await pc.setLocalDescription(await pc.createOffer())
        async with aiohttp.ClientSession() as http:
            status, answer, headers = await post_sdp(http, url, pc.localDescription.sdp)
            assert status == 201, answer
            await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
            assert await wait_until(lambda: "session.created" in events, 10), variant
            item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Say hello."}]}
            channel.send(json.dumps({"type": "conversation.item.create", "item": item}))
            channel.send(json.dumps({"type": "response.create", "response": {"max_output_tokens": 8}}))
            assert await wait_until(lambda: "response.done" in events, 20), (variant, events)
            assert await wait_until(lambda: "output_audio_buffer.stopped" in events, 10), (variant, events)
            async with http.delete(f"{url}{headers['Location']}") as response:
                assert response.status == 200
        await pc.close()

    async with serve(gateway_config(pool_size=1), models) as (url, app):
        for variant in ("datachannel", "sendonly"):
            await ask(url, variant)
            assert await wait_until(lambda: all_idle(app), 5)


async def test_ephemeral_keys_are_bounded(models, gateway_config):
    """Without ``--api-key`` anyone may mint ``ek_`` keys, each holding a session config of up
    to the request size limit for up to 2 h: memory grew without bound. Unexpired keys are now
    capped (``EphemeralKeys.max_keys``, 1000); past it, 429 with Retry-After."""
    from gateway.server.app_keys import KEYS

    async with serve(gateway_config(pool_size=1), models) as (url, app):
        keys = app[KEYS]
        keys.max_keys = 3
        session = {"type": "realtime", "instructions": "x" * 15000}  # under max_instructions_chars
        async with aiohttp.ClientSession() as http:

            async def mint() -> aiohttp.ClientResponse:
                response = await http.post(f"{url}/v1/realtime/client_secrets", json={"session": session})
                await response.read()
                return response

            assert [(await mint()).status for _ in range(3)] == [200, 200, 200]
            refused = await mint()
            assert refused.status == 429 and int(refused.headers["Retry-After"]) >= 1
            assert (await refused.json())["error"]["code"] == "rate_limit_exceeded"
            real_clock = keys.clock
            keys.clock = lambda: real_clock() + 61  # the default keys (60 s) have expired
            assert (await mint()).status == 200


async def test_bad_ice_server_setting_fails_at_start_not_per_call(models, gateway_config):
    """``--ice-servers bogus`` used to start fine; then every offer claimed a unit, failed in the
    RTCPeerConnection constructor (HTTP 500) and left the unit ``active`` for good: the pool was
    used up after ``pool_size`` offers. A malformed STUN URL (``stun:host:port`` with a bad port)
    failed later, as a 400 blaming the caller's offer."""
    import pytest

    for setting in ("bogus", "stun:stun.example.org:notaport", "turn:turn.example.org:3478"):
        with pytest.raises(ValueError, match="ice_servers"):
            async with serve(gateway_config(ice_servers=setting), models):
                pass


async def test_a_call_that_cannot_be_built_gives_its_unit_back(models, gateway_config, monkeypatch):
    """Anything that fails between claiming a unit and registering the call (here the peer
    connection) used to leave the unit claimed forever, answered with aiohttp's text 500, and
    used up the caller's single-use ephemeral key although no call came of it."""
    import gateway.transports.webrtc.call as call_module
    from gateway.server.app_keys import KEYS

    def broken(*args, **kwargs):
        raise RuntimeError("simulated failure")

    async with serve(gateway_config(pool_size=1), models) as (url, app):
        monkeypatch.setattr(call_module, "RTCPeerConnection", broken)
        key, _ = app[KEYS].mint()
        pc, offer = await make_offer("audio")
        await pc.close()
        async with aiohttp.ClientSession() as http:
            status, body, _ = await post_sdp(http, url, offer, Authorization=f"Bearer {key}")
        assert status == 500 and json.loads(body)["error"]["code"] == "server_error", body[:200]
        assert await wait_until(lambda: all_idle(app), 5), app[POOL].snapshot()
        assert app[KEYS].consume(key) is not None, "the ephemeral key was used up by a call that never was"


async def test_outbound_track_stops_before_the_unit_is_released(models, gateway_config):
    """The drain can finish, and the unit serve the next caller, while ``pc.close()`` is still
    stopping this call's sender, which reads the unit's playout buffer: the ended call's track
    must be stopped before the drain starts, not after the peer connection is closed."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        assert await client.connect() == 201
        call = app[SESSIONS].sessions[client.call_id].transport
        (transceiver,) = [t for t in call.pc.getTransceivers() if t.kind == "audio"]
        track = transceiver.sender.track
        unit = app[POOL].units[0]
        seen: list[str] = []
        begin_drain = unit.begin_drain

        def spy(reason: str) -> bool:
            seen.append(track.readyState)
            return begin_drain(reason)

        unit.begin_drain = spy
        try:
            await client.hangup()
        finally:
            del unit.begin_drain  # back to the class method
        assert seen == ["ended"], seen
        assert await wait_until(lambda: all_idle(app), 5)


def declare_64_kib(monkeypatch) -> None:
    """Both peers of the test's calls (aiortc's) declare ``a=max-message-size:65536``."""
    import aiortc.rtcsctptransport

    monkeypatch.setattr(aiortc.rtcsctptransport, "LOCAL_MAX_MESSAGE_SIZE", 65536)


async def connected_64_kib(url: str) -> RealtimeClient:
    """A caller connected to the gateway at ``url`` (:func:`declare_64_kib` set: a 64 KiB limit)."""
    client = RealtimeClient(url)
    assert await client.connect() == 201
    assert "a=max-message-size:65536" in client.pc.localDescription.sdp
    return client


async def test_an_event_over_the_callers_max_message_size_is_reported_not_dropped(
    models, gateway_config, monkeypatch, caplog
):
    """Failed before: a server event larger than the caller's SDP ``a=max-message-size`` (64 KiB
    here, as a peer that declares the RFC default or none; Chrome and aiortc declare 256 KiB) was
    refused by aiortc and dropped with a DEBUG line "send on closed data channel": a
    ``session.updated`` echoing 58 KB of tools (under the default ``max_tools_bytes``) never
    came, and the client was not told. Now the client gets a small ``error`` naming it, the
    server a WARNING, and the call goes on."""
    declare_64_kib(monkeypatch)
    tool = {"type": "function", "parameters": {"type": "object", "properties": {}}}
    tools = [{**tool, "name": f"tool_{n}", "description": "d" * 29_000} for n in range(2)]
    async with serve(gateway_config(), models) as (url, _app):
        client = await connected_64_kib(url)
        client.send({"type": "session.update", "session": {"type": "realtime", "instructions": "i" * 8000}})
        await client.wait_for("session.updated", timeout=10)
        mark = len(client.events)
        with caplog.at_level(logging.WARNING):
            client.send({"type": "session.update", "session": {"type": "realtime", "tools": tools}})
            error = (await client.wait_for("error", timeout=10, after=mark))["error"]
        assert error["type"] == "server_error" and error["code"] == "event_too_large", error
        assert "session.updated" in error["message"] and "65536" in error["message"], error
        assert not client.of_type("session.updated", after=mark)
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("session.updated" in m and "max-message-size" in m for m in warned), warned
        assert re.search(r"\(event_[A-Za-z0-9]+\)", error["message"]), "the event's id is named"

        client.send({"type": "session.update", "session": {"type": "realtime", "tools": []}})
        updated = await client.wait_for("session.updated", timeout=10, after=mark)
        assert updated["session"]["tools"] == [] and updated["session"]["instructions"] == "i" * 8000
        await client.hangup()


@pytest.mark.slow  # a real call
async def test_the_max_message_size_check_counts_utf8_bytes(models, gateway_config, monkeypatch):
    """Failed before: events went out with non-ASCII escaped, so a ``session.updated`` with 16,000
    characters of "€" was 96 KB (``\\u20ac`` each) and never reached a peer that takes 64 KiB; now
    it is 48 KB of UTF-8 and arrives. Sent raw, an event's size is its UTF-8 bytes, not its
    characters: a ``session.updated`` of 16,400 emoji (17 k characters, 66 KB) is over the limit
    and the caller is told (``event_too_large``), not left with an event aiortc refuses in silence.
    (The client sends its events as UTF-8 too: escaped, they would be over the limit themselves.)"""
    declare_64_kib(monkeypatch)
    tool = {"type": "function", "parameters": {"type": "object", "properties": {}}}
    tools = [{**tool, "name": f"tool_{n}", "description": "😀" * 4_200} for n in range(2)]
    async with serve(gateway_config(), models) as (url, _app):
        client = await connected_64_kib(url)

        def send(session: dict) -> int:
            mark = len(client.events)
            client.send_raw(json.dumps({"type": "session.update", "session": session}, ensure_ascii=False))
            return mark

        send({"type": "realtime", "instructions": "€" * 16_000})
        updated = await client.wait_for("session.updated", timeout=10)
        assert updated["session"]["instructions"] == "€" * 16_000
        mark = send({"type": "realtime", "instructions": "😀" * 8_000})
        assert (await client.wait_for("session.updated", timeout=10, after=mark))["session"]["instructions"][-1] == "😀"
        mark = send({"type": "realtime", "tools": tools})
        error = (await client.wait_for("error", timeout=10, after=mark))["error"]
        assert error["code"] == "event_too_large" and "session.updated" in error["message"], error
        size = int(re.search(r"it is (\d+) bytes", error["message"])[1])
        assert 16_400 * 4 < size < 16_400 * 4 + 4096, error["message"]  # UTF-8 bytes (4 an emoji)
        assert not client.of_type("session.updated", after=mark)
        await client.hangup()
