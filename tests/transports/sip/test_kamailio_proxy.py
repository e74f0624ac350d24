"""phone (baresip) -> Kamailio -> gateway: the call works through a proxy as through a trunk. The
gateway answers along the proxy's Via, keeps its Record-Route as the dialog's route set, and its
own BYE (a hang-up over HTTP) reaches the phone through the proxy (Route: the proxy, loose routing)."""

from __future__ import annotations

import aiohttp
import numpy as np
import pytest

from gateway.server.app_keys import SIP
from tests.helpers import app_idle, says, serve, wait_until
from tests.transports.sip.baresip_phone import BaresipPhone
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.kamailio_proxy import KamailioProxy
from tests.transports.websocket.ws_client import EventClient

QUESTION = "What is the capital of France?"


@pytest.mark.slow
async def test_a_call_through_kamailio_is_answered_and_hung_up_by_the_gateway(
    models, speech_8k, gateway_config, tmp_path
):
    config = sip_config(gateway_config, max_response_tokens=16)  # no webhook: accepted at once
    microphone = np.concatenate([np.zeros(8000, np.int16), speech_8k(QUESTION), np.zeros(8000 * 40, np.int16)])
    async with (
        serve(config, models) as (url, app),
        KamailioProxy(tmp_path / "kamailio", config.sip_port) as proxy,
        BaresipPhone(tmp_path / "phone", microphone) as phone,
    ):
        await phone.command("dial", f"sip:agent@127.0.0.1:{proxy.port}")
        await phone.event("CALL_ESTABLISHED")
        call_id = next(iter(app[SIP].calls))
        call = app[SIP].calls[call_id]
        assert call.dialog.route_set and f":{proxy.port}" in call.dialog.route_set[0]  # the proxy's Record-Route
        async with EventClient(url, query=f"?call_id={call_id}") as control:
            heard = await control.wait_for("conversation.item.input_audio_transcription.completed", timeout=60)
            assert says(heard["transcript"], QUESTION, misses=1), heard["transcript"]  # 8 kHz: BaresipPhone.converse
            await control.wait_for("response.done", timeout=90)
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/hangup") as hung:
                assert hung.status == 200
        await phone.event("CALL_CLOSED", within=15)  # our BYE went phone-ward through Kamailio
        assert await wait_until(lambda: app_idle(app) and not app[SIP].calls, 15)
        assert await wait_until(lambda: not app[SIP].transactions.client, 10)  # the BYE was answered
