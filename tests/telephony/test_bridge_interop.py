"""Interoperability with SIP-to-WebRTC bridges: certificates, BUNDLE and profiles, codec order,
SDP errors, connect timeouts and silence suppression as a bridge's WebRTC stack presents them.
Each test failed before its fix. The bridges are aiortc peers configured like them
(tests/telephony/peers.py)."""

from __future__ import annotations

import asyncio
import json
import re

import aiohttp
import pytest
from aiortc import RTCPeerConnection
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.client import RealtimeClient
from gateway.pool.unit import UnitState
from gateway.server.app_keys import POOL, SESSIONS
from tests.helpers import QUESTION, serve, wait_until
from tests.telephony.peers import SuppressingMicrophone, use_rsa_certificate


async def audio_offer(codec: str | None = None) -> tuple[RTCPeerConnection, str]:
    """A real aiortc offer: one sendrecv audio transceiver, no data channel (a bridge leg)."""
    pc = RTCPeerConnection()
    transceiver = pc.addTransceiver("audio", direction="sendrecv")
    if codec:
        from aiortc.rtcrtpsender import RTCRtpSender

        transceiver.setCodecPreferences(
            [c for c in RTCRtpSender.getCapabilities("audio").codecs if c.mimeType.lower() == f"audio/{codec.lower()}"]
        )
    await pc.setLocalDescription(await pc.createOffer())
    return pc, pc.localDescription.sdp


async def post_offer(url: str, sdp: str, content_type: str = "application/sdp") -> tuple[int, str]:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/v1/realtime/calls", data=sdp, headers={"Content-Type": content_type}) as response:
            return response.status, await response.text()


def idle(app) -> bool:
    return all(unit.state is UnitState.IDLE for unit in app[POOL].units)


async def test_peer_with_an_rsa_certificate_connects(models, gateway_config):
    """GStreamer and SIP bridges use RSA DTLS certificates. The gateway answered ``a=setup:active``
    and, as DTLS client, aiortc offers only ECDHE-ECDSA suites: "no shared cipher", ``ice_failed``.
    Now an ``actpass`` offer is answered ``a=setup:passive`` and the RSA peer connects."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        client = RealtimeClient(url)
        use_rsa_certificate(client.pc)
        assert await client.connect() == 201  # waits for session.created: DTLS and SCTP are up
        assert client.pc.connectionState == "connected"
        assert app[POOL].units[0].state is UnitState.ACTIVE
        # The handshake used the RSA certificate: the gateway's DTLS peer certificate is RSA, and
        # it is the one whose fingerprint the caller's offer announced.
        call = next(iter(app[SESSIONS].sessions.values())).transport
        peer = call.pc.sctp.transport._ssl.get_peer_certificate(as_cryptography=True)
        assert isinstance(peer.public_key(), rsa.RSAPublicKey), type(peer.public_key())
        offered = re.search(r"a=fingerprint:sha-256 (\S+)", client.pc.localDescription.sdp).group(1)
        assert peer.fingerprint(hashes.SHA256()).hex().upper() == offered.replace(":", ""), offered
        await client.hangup()
        assert await wait_until(lambda: idle(app), 10)


async def test_answer_without_bundle_keeps_the_offered_profile(models, gateway_config):
    """A FreeSWITCH leg offers no BUNDLE and ``RTP/SAVPF``: the answer had an empty
    ``a=group:BUNDLE `` line and ``UDP/TLS/RTP/SAVPF``. Now there is no group line and the profile
    is the offer's; the leg still connects."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        pc, offer = await audio_offer("PCMU")
        offer = re.sub(r"a=group:BUNDLE[^\r\n]*\r\n", "", offer).replace("UDP/TLS/RTP/SAVPF", "RTP/SAVPF")
        status, answer = await post_offer(url, offer)
        assert status == 201, answer
        assert "a=group:BUNDLE" not in answer, answer
        assert re.search(r"^m=audio \d+ RTP/SAVPF 0", answer, re.M), answer
        from aiortc import RTCSessionDescription

        await pc.setRemoteDescription(RTCSessionDescription(sdp=answer, type="answer"))
        assert await wait_until(lambda: pc.connectionState == "connected", 10)
        await pc.close()
        assert await wait_until(lambda: idle(app), 15)


async def test_opus_is_answered_when_offered_after_g711(models, gateway_config):
    """A bridge offering ``0 8 111`` (G.711 first) is answered with Opus first, the codec sent."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        pc = RTCPeerConnection()
        transceiver = pc.addTransceiver("audio", direction="sendrecv")
        from aiortc.rtcrtpsender import RTCRtpSender

        codecs = {c.mimeType.lower(): c for c in RTCRtpSender.getCapabilities("audio").codecs}
        transceiver.setCodecPreferences([codecs["audio/pcmu"], codecs["audio/pcma"], codecs["audio/opus"]])
        await pc.setLocalDescription(await pc.createOffer())
        assert re.search(r"^m=audio \d+ \S+ 0 8 \d+", pc.localDescription.sdp, re.M)
        status, answer = await post_offer(url, pc.localDescription.sdp)
        assert status == 201, answer
        opus = re.search(r"a=rtpmap:(\d+) opus/48000", answer).group(1)
        assert re.search(rf"^m=audio \d+ \S+ {opus} 0 8\b", answer, re.M), answer
        await pc.close()
        await app[SESSIONS].hangup(next(iter(app[SESSIONS].sessions)))


async def test_unparseable_offers_are_told_what_is_wrong_in_sdp_terms(models, gateway_config):
    """Malformed offers got a 400 whose message was a Python exception (``not enough values to
    unpack``, ``StopIteration``, an empty ``AssertionError``); JSON posted as the offer was not told
    about m-lines. Each now names the line and the rule."""
    async with serve(gateway_config(pool_size=1), models) as (url, app):
        pc, offer = await audio_offer()
        await pc.close()
        fingerprint = next(line for line in offer.splitlines() if line.startswith("a=fingerprint"))
        cases = {
            "fingerprint": (offer.replace(fingerprint, "a=fingerprint:sha-256"), "a=fingerprint"),
            "fmtp": (offer.replace("a=mid:0", "a=mid:0\r\na=fmtp:99 0-15"), "payload type 99 has no a=rtpmap"),
            "setup": (re.sub(r"a=setup:\w+", "a=setup:holdconn", offer), "a=setup must be"),
            "m-line": (re.sub(r"m=audio \d+", "m=audio nine", offer), "port"),
            "rtpmap": (re.sub(r"a=rtpmap:0 PCMU/8000", "a=rtpmap:0 PCMU", offer), "a=rtpmap:<payload type>"),
            "json": (json.dumps({"sdp": offer, "type": "offer"}), "JSON"),
            "no m-line": ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n", "no m-line"),
        }
        for name, (sdp, expected) in cases.items():
            status, body = await post_offer(url, sdp)
            assert status == 400, (name, status, body[:300])
            message = json.loads(body)["error"]["message"]
            assert expected in message, (name, message)
            assert not re.search(r"Error\b|StopIteration|unpack|Traceback", message), (name, message)
        assert app[POOL].units[0].sessions_served == 0 and not app[SESSIONS].sessions


async def test_call_that_never_connects_ends_as_connect_timeout(models, gateway_config):
    """The media watchdog started with the offer: a call whose ICE took longer than
    ``media_timeout_s`` (10 s) was ended as ``media_timeout`` although the connect timeout is 30 s.
    The media timeout now counts from the connection."""
    async with serve(gateway_config(pool_size=1, media_timeout_s=1.0, connect_timeout_s=3.0), models) as (url, app):
        pc, offer = await audio_offer()
        await pc.close()
        # No candidates and no end-of-candidates (trickle ICE that never trickles): ICE waits.
        offer = "\r\n".join(
            line for line in offer.split("\r\n") if not line.startswith("a=candidate") and line != "a=end-of-candidates"
        )
        status, answer = await post_offer(url, offer)
        assert status == 201, answer
        unit = app[POOL].units[0]
        assert await wait_until(lambda: unit.state is not UnitState.ACTIVE, 8)
        assert unit.close_reason == "connect_timeout", unit.close_reason
        assert await wait_until(lambda: idle(app), 10)


@pytest.mark.slow
async def test_silence_suppressing_caller_is_answered_and_stays(models, speech, gateway_config):
    """A caller that sends no RTP while it does not talk (SIP silence suppression, Opus DTX) never
    got an answer (the turn ended only on received silence frames) and was hung up as gone by the
    media watchdog. Now the turn ends on the clock and the caller, which still sends RTCP, stays
    for as long as it listens."""
    config = gateway_config(pool_size=1, media_timeout_s=2.5)  # over aiortc's RTCP interval (<= 1.5 s)
    async with serve(config, models) as (url, app):
        client = RealtimeClient(url)
        client.mic = SuppressingMicrophone()
        assert await client.connect() == 201
        start = len(client.events)
        client.say(speech(QUESTION))
        await client.wait_for("input_audio_buffer.speech_stopped", timeout=20, after=start)
        await client.wait_for("response.done", timeout=90, after=start)
        await client.wait_for("output_audio_buffer.stopped", timeout=60, after=start)
        await asyncio.sleep(2 * config.media_timeout_s)  # silent, RTP-less, still there
        assert not client.of_type("error", after=start), client.of_type("error", after=start)
        assert app[POOL].units[0].state is UnitState.ACTIVE
        await client.hangup()
