"""SIP calls count toward their source's live sessions (``max_sessions_per_source``, every
transport together): with a webhook deciding, a source that is no ``sip_trusted`` one holding 2
ringing calls gets ``503`` with ``Retry-After`` and ``too_many_sessions`` in ``Warning`` for its
next INVITE, as the SIP side answers its other limits; a ``sip_trusted`` source (a trunk, a proxy:
every caller from one address) is not limited. Before: every INVITE was admitted until the pool
was full. A real gateway (real pool and models) and bare SIP peers on loopback (loopback made an
ordinary source: no unlimited sources)."""

from __future__ import annotations

from gateway.server.app_keys import SIP
from tests.helpers import serve
from tests.transports.sip import sip_samples
from tests.transports.sip.conftest import sip_config
from tests.transports.sip.sip_socket import SipSocket


async def test_a_source_that_is_no_trunk_rings_at_most_its_share(models, gateway_config, webhook):
    config = sip_config(
        gateway_config,
        pool_size=4,
        sip_webhook_url=webhook.url,
        sip_accept_timeout_s=60,
        sip_trusted="127.0.0.1",
        unlimited_sources="",
    )
    async with serve(config, models) as (_, app), SipSocket(app[SIP].port) as trunk:
        port = app[SIP].port
        async with SipSocket(port, host="127.0.0.2") as stranger:
            for number in range(3):
                invite = sip_samples.invite(
                    port, caller_port=stranger.port, branch=f"z9hG4bKsrc{number}", call_id=f"source-{number}"
                )
                stranger.send(invite)
                if number < 2:
                    assert (await stranger.response(180, within=15)).status == 180
            refused = await stranger.response(503, within=15)
            assert int(refused.get("Retry-After") or 0) > 0 and "too_many_sessions" in (refused.get("Warning") or "")
            assert len(app[SIP].calls) == 2
        for number in range(2):  # the trunk: as many calls as the pool holds
            invite = sip_samples.invite(
                port, caller_port=trunk.port, branch=f"z9hG4bKtrunk{number}", call_id=f"trunk-{number}"
            )
            trunk.send(invite)
            assert (await trunk.response(180, within=15)).status == 180
        assert len(app[SIP].calls) == 4
