"""The stock OpenAI SDK retries a 409 and every 5xx twice unless the answer says
``x-should-retry: false`` (openai-python ``_should_retry``; openai-node the same). SIP call control
answered the phone's refusal of a transfer with 502 ``refer_failed`` and nothing else:
``client.realtime.calls.refer(...)`` sent the REFER three times, so a phone that declined the
transfer was asked twice more (a phone that does not answer REFERs cost three timeouts); an accept
or reject of a call already answered (a webhook delivered twice) waited out the retries of its 409
``call_state`` (~1.2 s). Neither can succeed when repeated: both answers now say
``x-should-retry: false``. A real SIP dialog from a bare peer on loopback, the SDK as published."""

from __future__ import annotations

import asyncio

import openai
import pytest

from gateway.server.app_keys import SIP
from gateway.transports.sip.message import SipRequest, make_response, parse_name_addr
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket


@pytest.mark.slow  # a real call; the SDK's retries, before the fix, take seconds
async def test_a_refused_refer_and_a_second_accept_are_not_retried_by_the_openai_sdk(models, gateway_config):
    config = sip_config(gateway_config, pool_size=1)
    async with serve(config, models) as (url, app), SipSocket(app[SIP].port) as peer:
        port = app[SIP].port
        peer.send(sip_samples.invite(port, caller_port=peer.port, branch="z9hG4bKretry1"))
        ok = await peer.response(200, within=15)  # auto-accepted: a trusted source, no webhook
        tag = parse_name_addr(ok.get("To") or "").tag
        peer.send(sip_samples.ack(port, tag, branch="z9hG4bKretry1ack", caller_port=peer.port))
        call_id = next(iter(app[SIP].calls))
        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="sk-unused", max_retries=2)

        transfer = asyncio.ensure_future(client.realtime.calls.refer(call_id, target_uri="tel:+15551234567"))
        refers = 0
        while not transfer.done():
            try:
                message = await peer.receive(within=0.5)
            except TimeoutError:
                continue
            if isinstance(message, SipRequest) and message.method == "REFER":
                refers += 1
                peer.send(make_response(message, 603, reason="Decline").encode())
        with pytest.raises(openai.InternalServerError) as refused:
            await transfer
        assert refers == 1  # the phone is asked once
        assert (refused.value.status_code, refused.value.code) == (502, "refer_failed")
        assert refused.value.response.headers.get("x-should-retry") == "false"

        with pytest.raises(openai.ConflictError) as answered:
            await client.realtime.calls.accept(call_id, type="realtime")
        assert answered.value.code == "call_state"
        assert answered.value.response.headers.get("x-should-retry") == "false"

        await client.realtime.calls.hangup(call_id)
        assert await wait_until(lambda: app_idle(app), 15)
