"""phone (baresip) -> Kamailio (registrar) -> Janus (SIP plugin) -> gateway's WebRTC door: a SIP
call that reaches the gateway through a real SIP-to-WebRTC bridge. The bridge controller
(``scripts/janus_bridge.py``) registers a Janus line at Kamailio, turns the incoming call's JSEP
offer into ``POST /v1/realtime/calls`` and accepts the Janus call with the gateway's SDP answer;
Janus relays the phone's G.711 RTP (and its RFC 4733 key presses) to the gateway over ICE and
DTLS-SRTP. The question is transcribed, the voiced reply is heard at the phone, the digits reach the
session, and a hang-up from either side ends both legs and drains the unit."""

from __future__ import annotations

import re
import signal

import aiohttp
import pytest

from gateway.server.app_keys import SESSIONS
from gateway.transports.transport import TransportKind
from tests.bridges.janus_server import janus_bridge
from tests.helpers import QUESTION, app_idle, content_words, says, serve, wait_until
from tests.ops.services import wait_exit
from tests.transports.sip.baresip_phone import BaresipPhone, microphone


@pytest.mark.slow
@pytest.mark.parametrize("hung_up_by", ["phone", "gateway"])
async def test_a_sip_call_through_janus_completes_a_turn_and_hangs_up(
    models, speech_8k, gateway_config, tmp_path, hung_up_by
):
    config = gateway_config(max_response_tokens=16)  # the WebRTC door only: no SIP on the gateway
    async with (
        serve(config, models) as (url, app),
        janus_bridge(tmp_path, url) as (line, bridge),
        BaresipPhone(tmp_path / "phone", microphone(speech_8k(QUESTION))) as phone,
    ):
        assert (await phone.command("dial", line))["ok"]
        await phone.event("CALL_ESTABLISHED", within=30)
        assert await wait_until(lambda: bool(bridge.gateway_calls()), 10), bridge.log
        call_id = bridge.gateway_calls()[0]
        session = app[SESSIONS].live(call_id)
        assert session is not None and session.kind is TransportKind.WEBRTC, call_id
        said = await phone.converse(url, call_id, QUESTION, press="15#")  # RFC 4733 digits pass Janus
        if hung_up_by == "phone":  # BYE -> Janus's hangup event -> the controller's DELETE; Janus also
            await phone.command("hangup")  # closes the WebRTC leg (DTLS alert): whichever comes first ends the call
            hung_up = re.compile(rf"gateway call {call_id} hung up \((200|404)\)")
            assert await wait_until(lambda: hung_up.search(bridge.log) is not None, 15), bridge.log
        else:  # DELETE -> the peer connection closes (DTLS alert) -> Janus sends the phone a BYE
            async with aiohttp.ClientSession() as http, http.delete(f"{url}/v1/realtime/calls/{call_id}") as hung:
                assert hung.status == 200
            await phone.event("CALL_CLOSED", within=15)
        assert await wait_until(lambda: app[SESSIONS].live(call_id) is None and app_idle(app), 15)
    heard_reply = phone.heard(models.stt)
    # G.711 both ways through two relays: a third of the reply's content words may go missing.
    assert says(heard_reply, said, misses=len(content_words(said)) // 3), (heard_reply, said)


@pytest.mark.slow
async def test_a_call_janus_brings_to_a_full_gateway_is_declined_503(models, speech_8k, gateway_config, tmp_path):
    """The second call reaches Janus's second line (a helper handle) while the one unit is taken:
    the gateway answers 503 and the controller declines the INVITE 503 (a PBX tries another route);
    the first call goes on until the controller is stopped (SIGTERM): it ends its gateway call, the
    unit drains, and destroying its Janus session hangs up the phone."""
    config = gateway_config(pool_size=1)
    async with (
        serve(config, models) as (url, app),
        janus_bridge(tmp_path, url) as (line, bridge),
        BaresipPhone(tmp_path / "first", microphone(speech_8k("Hello."))) as first,
        BaresipPhone(tmp_path / "second", microphone(speech_8k("Hello."))) as second,
    ):
        await first.command("dial", line)
        await first.event("CALL_ESTABLISHED", within=30)
        await second.command("dial", line)
        closed = await second.event("CALL_CLOSED", within=30)
        # Janus answered 503; Kamailio, a proxy, turns a 503 into a 500 (RFC 3261 16.7), reason kept.
        assert closed["param"] == "500 Service Unavailable", closed
        assert "the gateway answered 503" in bridge.log, bridge.log
        lines = set(re.findall(r"line (\d+): call \S+ from", bridge.log))
        assert len(lines) == 2, bridge.log  # each call came to its own Janus handle
        assert len(bridge.gateway_calls()) == 1 and len(app[SESSIONS].sessions) == 1
        assert bridge.service is not None
        bridge.service.signal(signal.SIGTERM)  # the controller stops: it ends its calls and its Janus session
        assert await wait_exit(bridge.service, 15) == 0, bridge.log
        await first.event("CALL_CLOSED", within=15)  # Janus hung up the phone
        assert await wait_until(lambda: not app[SESSIONS].sessions and app_idle(app), 15), bridge.log
