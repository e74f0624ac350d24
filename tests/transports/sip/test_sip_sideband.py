"""A sideband (``GET /v1/realtime?call_id=sip_...``) on a SIP call, from a bare SIP peer on loopback
and a real gateway (real pool and models), a webhook deciding: while the call rings there is no
session to steer (OpenAI's SIP guide: the webhook accepts the call with the session's
configuration, then the backend opens the call's WebSocket), so the upgrade is refused with a 409
``call_state`` naming the accept; once accepted, the same URL attaches. Before, it attached to the
ringing call, and a ``response.create`` sent on it waited, unanswered, for an accept that might
never come."""

from __future__ import annotations

import json

import aiohttp
import pytest

from gateway.server.app_keys import SIP
from tests.helpers import serve
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket
from tests.transports.websocket.ws_client import EventClient


async def test_a_sideband_on_a_ringing_call_is_refused_until_the_accept(models, gateway_config, webhook):
    config = sip_config(gateway_config, pool_size=1, sip_webhook_url=webhook.url, sip_accept_timeout_s=60)
    async with serve(config, models) as (url, app), SipSocket(app[SIP].port) as caller:
        caller.send(sip_samples.invite(app[SIP].port, caller_port=caller.port, branch="z9hG4bKsb1", call_id="sb-1"))
        assert (await caller.response(180, within=15)).status == 180
        event = json.loads((await webhook.next())[1])
        call_id = event["data"]["call_id"]
        query = f"?call_id={call_id}"

        early = EventClient(url, query=query)
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await early.open()
        assert refused.value.status == 409
        error = json.loads(early.refusal_body or "{}")["error"]
        assert (error["code"], error["param"]) == ("call_state", "call_id"), error
        assert "ringing" in error["message"] and f"/v1/realtime/calls/{call_id}/accept" in error["message"]
        assert app[SIP].calls[call_id].state == "ringing"  # the refusal left the call as it was

        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/accept", json={"type": "realtime"}) as accepted:
                assert accepted.status == 200
        assert (await caller.response(200, within=15)).status == 200
        async with EventClient(url, query=query) as control:
            await control.send("session.update", session={"type": "realtime", "instructions": "Be brief."})
            updated = await control.wait_for("session.updated", timeout=10)
            assert updated["session"]["instructions"] == "Be brief."
