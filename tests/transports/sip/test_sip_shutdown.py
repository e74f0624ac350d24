"""A SIP call at shutdown, on a real gateway (real pool and models) over loopback: the graceful
drain (what SIGTERM runs, then the runner's clean-up) ends an answered call with a BYE that is
retransmitted (RFC 3261 Timer E) until the trunk answers it, within ``drain_timeout_s``; a trunk
that never answers still gets more than one, and the drain still ends."""

from __future__ import annotations

import asyncio
from typing import Optional

import pytest

from gateway.server.app_keys import POOL, SHUTDOWN, SIP
from gateway.transports.sip.message import SipRequest, make_response, parse_name_addr
from tests.helpers import serve
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket


async def _take_byes(trunk: SipSocket, byes: list[SipRequest], answer_at: Optional[int]) -> None:
    """Collect the BYEs that reach ``trunk``, answering only the ``answer_at``-th (1 is the first)."""
    while True:
        message = await trunk.receive(within=120)
        if isinstance(message, SipRequest) and message.method == "BYE":
            byes.append(message)
            if len(byes) == answer_at:
                trunk.send(make_response(message, 200).encode())


@pytest.mark.parametrize("answer_at", [2, None])
async def test_the_bye_of_a_call_at_shutdown_is_retransmitted_until_answered(
    models, gateway_config, answer_at: Optional[int]
):
    config = sip_config(gateway_config, pool_size=1, drain_timeout_s=2.5)
    byes: list[SipRequest] = []
    loop = asyncio.get_running_loop()
    media, _ = await loop.create_datagram_endpoint(asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0))
    media_port = media.get_extra_info("sockname")[1]
    async with SipSocket(config.sip_port) as trunk:
        async with serve(config, models) as (_, app):
            port = app[SIP].port
            trunk.send(sip_samples.invite(port, caller_port=trunk.port, rtp_port=media_port))
            ok = await trunk.response(200, within=15)
            tag = parse_name_addr(ok.get("To") or "").tag
            trunk.send(sip_samples.ack(port, tag, branch="z9hG4bKshutdownack", caller_port=trunk.port))
            taking = asyncio.ensure_future(_take_byes(trunk, byes, answer_at))
            report = await asyncio.wait_for(app[SHUTDOWN].drain(app[POOL].units), 60)  # it ends
            assert report.finished == 1 and not app[SIP].calls
            if answer_at is not None:
                assert not app[SIP].transactions.client  # answered: nothing left to send
        await asyncio.sleep(1.0)  # after the clean-up: nothing more comes
        assert not taking.done(), taking  # (still reading: it met nothing it could not parse)
        taking.cancel()
    media.close()
    if answer_at is not None:
        assert len(byes) == answer_at, len(byes)  # (before: the one BYE, never again)
    else:
        assert len(byes) >= 2, len(byes)  # T1 0.5 s, 1.5 s... within drain_timeout_s
    assert len({bye.get("Via") for bye in byes}) == 1  # one transaction: the same BYE again
