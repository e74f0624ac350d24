"""phone (baresip) -> Kamailio + rtpengine -> gateway's SIP door: the call's media relayed by a
real rtpengine (userspace), as a PBX or SBC with a media relay puts it. The SDP's ``c=`` the gateway
gets is rtpengine's (127.0.0.2), not the phone's, and its RTP comes from there, not from Kamailio
(127.0.0.1): the gateway is configured as such an operator would, ``--sip-rtp-latch sdp``. The
question is transcribed, the voiced reply heard at the phone, and a hang-up from either side ends
the call, rtpengine's session and the unit."""

from __future__ import annotations

import logging
import re

import aiohttp
import pytest

from gateway.server.app_keys import POOL, SESSIONS, SIP
from tests.bridges.rtpengine_relay import RtpEngine, RtpPhone
from tests.helpers import QUESTION, app_idle, content_words, says, serve, wait_until
from tests.transports.sip.baresip_phone import BaresipPhone, microphone, transcribed
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.kamailio_proxy import KamailioProxy
from tests.transports.websocket.ws_client import EventClient


@pytest.mark.slow
@pytest.mark.parametrize("hung_up_by", ["phone", "gateway"])
async def test_a_call_relayed_by_rtpengine_completes_a_turn_and_hangs_up(
    models, speech_8k, gateway_config, tmp_path, hung_up_by
):
    config = sip_config(gateway_config, max_response_tokens=16, sip_rtp_latch="sdp")
    async with (
        serve(config, models) as (url, app),
        RtpEngine(tmp_path / "rtpengine") as relay,
        # The operator's setup: Kamailio sends the gateway its SIP over TCP (a source that cannot be forged).
        KamailioProxy(
            tmp_path / "kamailio", config.sip_port, rtpengine=relay.ng_port, gateway_transport="tcp"
        ) as proxy,
        BaresipPhone(tmp_path / "phone", microphone(speech_8k(QUESTION))) as phone,
    ):
        assert (await phone.command("dial", f"sip:agent@127.0.0.1:{proxy.port}"))["ok"]
        await phone.event("CALL_ESTABLISHED", within=30)
        call_id = next(iter(app[SIP].calls))
        call = app[SIP].calls[call_id]
        said = await phone.converse(url, call_id, QUESTION)
        # The media came from rtpengine's address, named by the SDP; the signalling from Kamailio's, over TCP.
        assert call.rtp.latched and call.rtp.remote[0] == relay.address, call.rtp.remote
        assert call.dialog.transport == "TCP" and len(call.dialog.route_set) == 2  # Kamailio's double Record-Route
        if hung_up_by == "phone":
            await phone.command("hangup")
            assert await wait_until(lambda: call_id not in app[SIP].calls, 10)
            assert call.end_reason == "caller_bye"
        else:  # the gateway's BYE goes phone-ward through Kamailio, which deletes rtpengine's session
            async with aiohttp.ClientSession() as http, http.delete(f"{url}/v1/realtime/calls/{call_id}") as hung:
                assert hung.status == 200
            await phone.event("CALL_CLOSED", within=15)
        assert await wait_until(lambda: app_idle(app) and not app[SIP].calls, 15)
        # rtpengine's session was deleted, and it relayed the audio both ways (50 packets a second).
        assert await wait_until(lambda: len(relay.relayed_packets()) == 2, 10), relay.log[-3000:]
        assert min(relay.relayed_packets()) > 100, relay.relayed_packets()
    heard_reply = phone.heard(models.stt)
    # G.711 both ways through the relay: a third of the reply's content words may go missing.
    assert says(heard_reply, said, misses=len(content_words(said)) // 3), (heard_reply, said)


@pytest.mark.slow
async def test_with_the_default_latch_the_relayed_media_is_refused(models, speech_8k, gateway_config, tmp_path, caplog):
    """Why the operator sets ``--sip-rtp-latch sdp`` behind rtpengine: with the default
    (``signalling``) only RTP from the INVITE's source address (Kamailio's) may latch, so
    rtpengine's packets are dropped, logged once, and the caller is not heard."""
    caplog.set_level(logging.INFO, logger="gateway.transports.sip.rtp")
    config = sip_config(gateway_config)
    async with (
        serve(config, models) as (_, app),
        RtpEngine(tmp_path / "rtpengine") as relay,
        KamailioProxy(tmp_path / "kamailio", config.sip_port, rtpengine=relay.ng_port) as proxy,
        BaresipPhone(tmp_path / "phone", microphone(speech_8k(QUESTION))) as phone,
    ):
        await phone.command("dial", f"sip:agent@127.0.0.1:{proxy.port}")
        await phone.event("CALL_ESTABLISHED", within=30)
        call = next(iter(app[SIP].calls.values()))
        assert await wait_until(lambda: call.rtp.dropped >= 50, 10), call.rtp.dropped  # a second of audio
        assert not call.rtp.latched and call.rtp.packets == 0
        assert f"RTP from {relay.address}:" in caplog.text and "not an address this call latches to" in caplog.text
        await phone.command("hangup")
        assert await wait_until(lambda: app_idle(app) and not app[SIP].calls, 15)


@pytest.mark.slow
@pytest.mark.parametrize("hung_up_by", ["phone", "gateway"])
async def test_rtpengine_turns_a_phones_rtp_into_webrtc_for_the_webrtc_door(
    models, speech_8k, gateway_config, tmp_path, hung_up_by
):
    """rtpengine as the media half of a SIP-to-WebRTC bridge: the signalling side (here the test,
    speaking rtpengine's NG protocol as a SIP proxy's rtpengine module does) has rtpengine turn a
    phone's plain RTP offer into a WebRTC one (``ICE=force``, ``DTLS=passive``,
    ``UDP/TLS/RTP/SAVPF``, ``rtcp-mux``), posts that to ``POST /v1/realtime/calls`` and gives
    rtpengine the gateway's answer. The phone's PCMU reaches the gateway over ICE and DTLS-SRTP (the
    gateway's DTLS server with its ECDSA certificate, rtpengine's client), its question is
    transcribed and the voiced reply comes back to the phone as plain RTP. The gateway hanging up
    (``DELETE``) or the phone (its signalling deletes rtpengine's call: the gateway hears nothing
    more and ends the call after ``media_timeout_s``) drains the unit."""
    config = gateway_config(pool_size=1, max_response_tokens=16, media_timeout_s=4.0)
    call = {"call-id": "bridge-call-1", "from-tag": "phone"}
    async with (
        serve(config, models) as (url, app),
        RtpEngine(tmp_path / "rtpengine") as relay,
        RtpPhone(microphone(speech_8k(QUESTION))) as phone,
    ):
        unit = app[POOL].units[0]
        webrtc = await relay.ng(
            {
                "command": "offer", **call, "sdp": phone.offer(), "ICE": "force", "DTLS": "passive",
                "transport-protocol": "UDP/TLS/RTP/SAVPF", "rtcp-mux": ["offer"], "SDES": ["off"],
            }
        )  # fmt: skip
        assert "a=fingerprint:" in webrtc["sdp"] and "a=ice-ufrag:" in webrtc["sdp"], webrtc["sdp"]
        async with aiohttp.ClientSession() as http:
            headers = {"Content-Type": "application/sdp"}
            async with http.post(f"{url}/v1/realtime/calls", data=webrtc["sdp"], headers=headers) as answered:
                assert answered.status == 201, await answered.text()
                answer, call_id = await answered.text(), answered.headers["Location"].rsplit("/", 1)[-1]
        plain = await relay.ng({"command": "answer", **call, "to-tag": "gateway", "sdp": answer})
        address = re.search(r"^c=IN IP4 (\S+)", plain["sdp"], re.M)
        port = re.search(r"^m=audio (\d+) RTP/AVP ", plain["sdp"], re.M)
        assert address and port, plain["sdp"]  # the phone gets plain RTP, from rtpengine
        phone.send_to(address.group(1), int(port.group(1)))
        async with EventClient(url, query=f"?call_id={call_id}") as control:
            said = await control.answered_turn(QUESTION)
        if hung_up_by == "phone":  # its signalling deletes rtpengine's call, which sends no DTLS alert:
            await relay.ng({"command": "delete", **call})  # the gateway hears nothing more
            assert await wait_until(lambda: unit.close_reason == "media_timeout", 3 * config.media_timeout_s + 10)
        else:
            async with aiohttp.ClientSession() as http, http.delete(f"{url}/v1/realtime/calls/{call_id}") as hung:
                assert hung.status == 200
            await relay.ng({"command": "delete", **call})
        assert await wait_until(lambda: app_idle(app) and app[SESSIONS].live(call_id) is None, 15)
        assert "DTLS-SRTP successfully negotiated" in relay.log, relay.log[-3000:]
        assert min(relay.relayed_packets()) > 100, relay.relayed_packets()  # both ways: over 2 s of audio
    heard_reply = transcribed(models.stt, phone.heard(), 8000)
    assert says(heard_reply, said, misses=len(content_words(said)) // 3), (heard_reply, said)
