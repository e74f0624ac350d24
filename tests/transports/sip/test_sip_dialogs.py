"""In-dialog matching and a failed accept, with a real call (real pool and models) from a bare SIP
peer on loopback: a request with the right Call-ID and To tag but another From tag is not the
dialog's (RFC 3261 12.2.2: 481); a call whose accept failed still rings, so CANCEL ends it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.realtime.items import ClientError
from gateway.server.app_keys import SIP
from gateway.transports.sip.message import parse_name_addr
from tests.helpers import serve, wait_until
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket


async def _ringing(app: Any, peer: SipSocket, call_id: str, branch: str) -> Any:
    port = app[SIP].port
    invite = sip_samples.invite(port, caller_port=peer.port, branch=branch, call_id=call_id)
    peer.send(invite)
    assert (await peer.response(180, within=15)).status == 180
    return next(c for c in app[SIP].calls.values() if c.dialog.call_id == call_id)


@pytest.mark.slow
async def test_a_request_with_another_from_tag_is_not_the_dialogs(models, gateway_config, webhook):
    config = sip_config(gateway_config, pool_size=1, sip_webhook_url=webhook.url, sip_accept_timeout_s=60)
    async with serve(config, models) as (_, app), SipSocket(app[SIP].port) as peer:
        port = app[SIP].port
        call = await _ringing(app, peer, "dialog-1", "z9hG4bKdlg1")
        app[SIP].accept(call.id, None)
        ok = await peer.response(200, within=15)
        tag = parse_name_addr(ok.get("To") or "").tag
        peer.send(
            sip_samples.ack(port, tag, branch="z9hG4bKdlg1ack", caller_port=peer.port).replace(
                b"d9c18dac2b108fb9", b"dialog-1"
            )
        )
        forged = sip_samples.in_dialog(
            "BYE", port, tag, caller_port=peer.port, call_id="dialog-1", branch="z9hG4bKforged", from_tag="someone-else"
        )
        peer.send(forged)
        assert (await peer.response(within=15)).status == 481
        assert call.end_reason is None
        bye = sip_samples.in_dialog("BYE", port, tag, caller_port=peer.port, call_id="dialog-1", branch="z9hG4bKbye")
        peer.send(bye)
        assert (await peer.response(200, within=15)).status == 200
        assert await wait_until(lambda: not app[SIP].calls, 15)


@pytest.mark.slow
async def test_a_call_whose_accept_failed_still_rings_and_cancel_ends_it(
    models, gateway_config, webhook, monkeypatch: pytest.MonkeyPatch
):
    config = sip_config(gateway_config, pool_size=1, sip_webhook_url=webhook.url, sip_accept_timeout_s=60)
    async with serve(config, models) as (_, app), SipSocket(app[SIP].port) as peer:
        port = app[SIP].port
        call = await _ringing(app, peer, "d9c18dac2b108fb9", "z9hG4bKacc1")

        def refused(*args: object) -> None:
            raise ClientError("the update cannot apply", None, None)

        monkeypatch.setattr(call, "accept", refused)
        with pytest.raises(ClientError):
            app[SIP].accept(call.id, None)
        peer.send(sip_samples.cancel(port, caller_port=peer.port, branch="z9hG4bKacc1"))
        assert (await peer.response(487, within=15)).status == 487
        assert await wait_until(lambda: not app[SIP].calls, 15)  # not left ringing until the accept timeout
        await asyncio.sleep(0)
