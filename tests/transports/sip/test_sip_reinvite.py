"""Re-INVITEs of a SIP call against a real gateway (real pool and models, auto-accept unless a
webhook rings) from raw sockets on loopback: a session refresh gets the same answer; new SDES keys
re-key the call (RFC 4568 7.1.4); a new media address moves the RTP (a PBX handing the media to
the phone); a change of the codec's clock rate (G.711 -> Opus) gets 488 and the call goes on as it
was (a change at the same rate is followed: test_sip_reoffer_codec.py); hold and resume are mirrored
and followed; a re-INVITE's 2xx is retransmitted until its ACK; a re-INVITE while the call still
rings gets 500 with Retry-After (RFC 3261 14.2)."""

from __future__ import annotations

import asyncio
import base64
import re
import time

import pytest
from pylibsrtp import Policy, Session

from gateway.server.app_keys import METRICS, SIP
from gateway.transports.sip.message import SipResponse, parse_name_addr
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.reinvite_peer import CallerRtp, answered_call, media_port, offered, origin
from tests.transports.sip.sip_socket import SipSocket

OFFERED_KEY = sip_samples.OFFERED_KEY


def _dropped(app, reason: str) -> float:
    return app[METRICS].registry.get_sample_value("vg_sip_srtp_dropped_total", {"reason": reason}) or 0.0


async def test_a_reinvite_with_a_new_key_rekeys_the_call(models, gateway_config):
    """A caller (or its bridge) may change its SDES key in a re-INVITE (RFC 4568 7.1.4). Before,
    every re-INVITE was answered with the first answer and the key was never read: from then on
    each of the caller's packets failed authentication and the call went deaf. Now the new key
    checks what comes in (packets in flight under the old one still count until the new one is
    used), the answer keeps our key with the offer's tag and the next ``o=`` version; a refresh
    repeats the answer; an Opus-only offer (a change of clock rate mid-call) gets 488 and the call
    goes on as it was."""
    config = sip_config(gateway_config, media_timeout_s=30.0)
    media_socket, _media, rtp_port = await media_port()
    new_key = base64.b64encode(bytes(range(30))).decode()
    old_sender = Session(Policy(base64.b64decode(OFFERED_KEY), Policy.SSRC_ANY_OUTBOUND))
    new_sender = Session(Policy(base64.b64decode(new_key), Policy.SSRC_ANY_OUTBOUND))
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            srtp_sdp = sip_samples.BARESIP_SRTP_SDP
            caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=rtp_port, sdp=srtp_sdp))
            ok = await caller.response(200, within=15)
            assert isinstance(ok, SipResponse)
            answer = ok.body.decode()
            gateway_port = int(re.search(r"m=audio (\d+) RTP/SAVP 0 101", answer).group(1))  # type: ignore[union-attr]
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKrekeyack", caller_port=caller.port))
            call = next(iter(app[SIP].calls.values()))
            rtp = CallerRtp(gateway_port)

            def send(session: Session, count: int) -> None:
                rtp.send(media_socket, count, ssrc=99, srtp=session)

            send(old_sender, 10)
            assert await wait_until(lambda: call.rtp.packets == 10, 10)

            refreshed = await offered(caller, port, tag, srtp_sdp, rtp_port, 39458)  # a session refresh
            assert refreshed.status == 200 and refreshed.body.decode() == answer

            new_offer = srtp_sdp.replace(OFFERED_KEY, new_key).replace("crypto:1", "crypto:2")
            rekeyed = (await offered(caller, port, tag, new_offer, rtp_port, 39459)).body.decode()
            ours = re.search(r"a=crypto:(\d+) AES_CM_128_HMAC_SHA1_80 inline:(\S+)", rekeyed)
            first = re.search(r"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:(\S+)", answer)
            assert ours and first and ours.group(1) == "2" and ours.group(2) == first.group(1), rekeyed
            assert origin(rekeyed) == (origin(answer)[0], origin(answer)[1] + 1)

            send(old_sender, 2)  # still in flight under the old key
            assert await wait_until(lambda: call.rtp.packets == 12, 10)
            send(new_sender, 10)
            assert await wait_until(lambda: call.rtp.packets == 22, 10), _dropped(app, "authentication")
            assert _dropped(app, "authentication") == 0
            send(old_sender, 3)  # the new key is in use: the old one is done
            assert await wait_until(lambda: _dropped(app, "authentication") == 3, 10)

            opus_only = srtp_sdp.replace("RTP/SAVP 0 8 101", "RTP/SAVP 96 101").replace(OFFERED_KEY, new_key)
            opus_only = opus_only.replace("a=rtpmap:0 PCMU/8000\r\n", "a=rtpmap:96 opus/48000/2\r\n")
            refused = await offered(caller, port, tag, opus_only.replace("crypto:1", "crypto:2"), rtp_port, 39460)
            assert refused.status == 488
            assert "8000 Hz" in (refused.get("Warning") or ""), refused.get("Warning")
            send(new_sender, 5)  # the call goes on as it was
            assert await wait_until(lambda: call.rtp.packets == 27, 10)
            assert call.end_reason is None

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39461))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        media_socket.close()


async def test_a_reinvite_moving_the_media_moves_the_rtp(models, gateway_config):
    """A PBX that answers first and then hands the media to the phone (Asterisk's direct media) or
    a bridge after a transfer sends a re-INVITE with a new ``c=``/``m=`` port. Before, the stream
    stayed latched to the first address: the new one's packets were dropped as foreign and the
    replies went to the old port, so the call went deaf and mute. Now the RTP moves: replies go to
    the new port and its packets are heard (latched again, from a trusted address); an offer
    holding the call the old way (``c=0.0.0.0``, RFC 2543) moves nothing."""
    config = sip_config(gateway_config, media_timeout_s=30.0)
    first_socket, first, first_port = await media_port()
    second_socket, second, second_port = await media_port()
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            caller.send(sip_samples.invite(port, caller_port=caller.port, rtp_port=first_port))
            ok = await caller.response(200, within=15)
            assert isinstance(ok, SipResponse)
            gateway_port = int(re.search(r"m=audio (\d+) RTP/AVP", ok.body.decode()).group(1))  # type: ignore[union-attr]
            tag = parse_name_addr(ok.get("To") or "").tag
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKmoveack", caller_port=caller.port))
            call = next(iter(app[SIP].calls.values()))
            rtp = CallerRtp(gateway_port)

            def send(socket: asyncio.DatagramTransport, ssrc: int, count: int) -> None:
                rtp.send(socket, count, ssrc=ssrc)

            send(first_socket, 11, 10)
            assert await wait_until(lambda: call.rtp.packets == 10 and call.rtp.latched, 10)
            assert await wait_until(lambda: len(first.datagrams) >= 5, 10)  # replies (silence) go there

            assert (await offered(caller, port, tag, sip_samples.BARESIP_SDP, second_port, 39458)).body
            sent_before = len(second.datagrams)
            send(second_socket, 22, 10)  # the phone, now sending itself
            assert await wait_until(lambda: call.rtp.packets == 20, 10), (call.rtp.packets, call.rtp.dropped)
            assert call.rtp.remote == ("127.0.0.1", second_port)
            assert await wait_until(lambda: len(second.datagrams) >= sent_before + 5, 10)
            at_first = len(first.datagrams)
            send(first_socket, 11, 5)  # the old leg is no longer the call's
            assert await wait_until(lambda: call.rtp.dropped >= 5, 10)
            await asyncio.sleep(0.3)
            assert len(first.datagrams) == at_first and call.rtp.packets == 20

            held = sip_samples.BARESIP_SDP.replace("c=IN IP4 {rtp_host}", "c=IN IP4 0.0.0.0")
            assert (await offered(caller, port, tag, held, second_port, 39459)).body
            assert call.rtp.remote == ("127.0.0.1", second_port) and call.end_reason is None

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39460))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        first_socket.close()
        second_socket.close()


@pytest.mark.slow
async def test_hold_and_resume_are_followed_and_a_reinvites_2xx_is_retransmitted(models, gateway_config):
    """A PBX puts the call on hold with a re-INVITE (``a=sendonly``, often playing music; or
    ``a=inactive``, sending nothing) and takes it off with ``a=sendrecv``. Before, every re-INVITE
    got the first answer back (``a=sendrecv``, against RFC 3264 6.1), the gateway kept sending its
    audio, heard the hold music as the caller, and a hold without media ended the call at the media
    timeout. Now the answer mirrors the direction (``recvonly``, ``inactive``, ``sendrecv``, each a
    new ``o=`` version), nothing is sent or heard while held, the media timeout waits, and resuming
    restores both. Also before: the 2xx of a re-INVITE was sent once, so over UDP a lost 200 made
    the caller's re-INVITE time out (RFC 3261 14.1: the caller then ends the call); now it is
    retransmitted until its ACK (13.3.1.4)."""
    config = sip_config(gateway_config, media_timeout_s=1.5)
    media_socket, media, rtp_port = await media_port()
    try:
        async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
            port = config.sip_port
            ok, tag, gateway_port = await answered_call(caller, port, rtp_port)
            answer = ok.body.decode()
            call = next(iter(app[SIP].calls.values()))
            rtp = CallerRtp(gateway_port)

            def send(count: int) -> None:
                rtp.send(media_socket, count)

            send(10)
            assert await wait_until(lambda: call.rtp.latched and len(media.datagrams) >= 5, 10)
            heard = []
            call.rtp.on_audio = lambda samples, arrival, inner=call.rtp.on_audio: (
                heard.append(1),
                inner(samples, arrival),
            )

            # On hold with music: answered recvonly, the 200 retransmitted until its ACK
            music_hold = sip_samples.BARESIP_SDP.replace("a=sendrecv", "a=sendonly")
            held = await offered(caller, port, tag, music_hold, rtp_port, 39458, ack=False)
            assert "a=recvonly" in held.body.decode() and "a=sendrecv" not in held.body.decode()
            assert origin(held.body.decode()) == (origin(answer)[0], origin(answer)[1] + 1)
            again = await caller.response(200, within=3)  # T1 = 0.5 s: the same 200 again
            assert again.get("CSeq") == "39458 INVITE" and again.body == held.body
            caller.send(sip_samples.ack(port, tag, branch="z9hG4bKholdack2", caller_port=caller.port, cseq=39458))
            await asyncio.sleep(0.3)
            sent, heard_before = len(media.datagrams), len(heard)
            for _ in range(10):  # the hold music plays for 1 s: not heard; nothing is sent
                send(5)
                await asyncio.sleep(0.1)
            assert len(media.datagrams) == sent and len(heard) == heard_before
            with pytest.raises(TimeoutError):  # acknowledged: no more retransmissions
                await caller.response(200, within=2)

            # On hold without media, longer than the media timeout: the call stays
            inactive = sip_samples.BARESIP_SDP.replace("a=sendrecv", "a=inactive")
            paused = await offered(caller, port, tag, inactive, rtp_port, 39459)
            assert "a=inactive" in paused.body.decode()
            started = time.monotonic()
            await asyncio.sleep(3 * config.media_timeout_s)
            assert call.end_reason is None, (call.end_reason, time.monotonic() - started)

            # Resumed: sendrecv again, heard and sent to
            resumed = await offered(caller, port, tag, sip_samples.BARESIP_SDP, rtp_port, 39460)
            assert "a=sendrecv" in resumed.body.decode()
            assert origin(resumed.body.decode())[1] == origin(answer)[1] + 3
            send(10)
            assert await wait_until(lambda: len(heard) > heard_before and len(media.datagrams) > sent + 5, 10)

            caller.send(sip_samples.in_dialog("BYE", port, tag, caller_port=caller.port, cseq=39461))
            assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
    finally:
        media_socket.close()


@pytest.mark.slow
async def test_a_reinvite_while_the_call_rings_gets_500_with_retry_after(models, gateway_config, webhook):
    """RFC 3261 14.2: an INVITE on the dialog before the first one's final response gets 500 with
    a Retry-After of 0-10 s. Before, it was taken as a re-INVITE of an answered call: a 200 without
    an answer (there was none yet), and its SDP moved or re-keyed media not set up."""
    config = sip_config(gateway_config, pool_size=1, sip_webhook_url=webhook.url, sip_accept_timeout_s=60)
    async with serve(config, models) as (_url, app), SipSocket(config.sip_port) as caller:
        port = config.sip_port
        caller.send(sip_samples.invite(port, caller_port=caller.port))
        ringing = await caller.response(180, within=15)
        tag = parse_name_addr(ringing.get("To") or "").tag
        call = next(iter(app[SIP].calls.values()))
        refused = await offered(caller, port, tag, sip_samples.BARESIP_SDP, 20006, 39458)
        assert refused.status == 500 and 0 <= int(refused.get("Retry-After") or "-1") <= 10, refused.encode()
        assert call.state == "ringing" and call.rtp.remote == ("127.0.0.1", 20004)
        caller.send(sip_samples.cancel(port, caller_port=caller.port, branch="z9hG4bK9d8481eb70f7749f"))
        assert (await caller.response(487, within=15)).status == 487
        assert await wait_until(lambda: not app[SIP].calls and app_idle(app), 15)
