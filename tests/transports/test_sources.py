"""Who a caller is, by address (``gateway.transports.sources``): the key a source is counted by,
and the client of a request through trusted proxies (the last hop of ``X-Forwarded-For`` that is
not one; what a client wrote itself is never believed)."""

from __future__ import annotations

import pytest

from gateway.config import GatewayConfig
from gateway.transports.sources import SourceLimits, forwarded_client, parse_networks, source_key

LOOPBACK = parse_networks("127.0.0.0/8,::1", "trusted_proxies")


def test_an_ipv6_source_is_its_slash_64_and_a_mapped_ipv4_its_ipv4():
    assert source_key("2001:db8:1:2::1") == source_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert source_key("2001:db8:1:3::1") != source_key("2001:db8:1:2::1")
    assert source_key("::ffff:203.0.113.7") == source_key("203.0.113.7") == "203.0.113.7"
    assert source_key("unknown") == "unknown"


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("203.0.113.7", ["198.51.100.1"], "203.0.113.7"),  # a peer that is no proxy: its header is ignored
        ("127.0.0.1", [], "127.0.0.1"),  # the box itself
        ("127.0.0.1", ["203.0.113.7"], "203.0.113.7"),  # nginx on loopback
        ("127.0.0.1", ["198.51.100.1, 203.0.113.7"], "203.0.113.7"),  # the client's own entry is left of nginx's
        ("127.0.0.1", ["198.51.100.1", "203.0.113.7, 127.0.0.2"], "203.0.113.7"),  # two headers, two proxies
        ("127.0.0.1", ["garbage, 127.0.0.5"], "garbage"),  # no address: counted as itself, never exempt
    ],
)
def test_the_client_is_the_last_hop_that_is_no_trusted_proxy(peer, forwarded, client):
    assert forwarded_client(peer, forwarded, LOOPBACK) == client


def test_the_defaults_trust_and_exempt_loopback_only():
    limits = SourceLimits.from_config(GatewayConfig())
    assert limits.max_sessions == 2 and limits.max_http_connections == 32
    assert not limits.limited("127.0.0.1") and not limits.limited("::1") and not limits.limited(None)
    assert limits.limited("203.0.113.7") and limits.limited("10.0.0.1")
    assert limits.client("127.0.0.1", ["203.0.113.7"]) == "203.0.113.7"
    with pytest.raises(ValueError, match="unlimited_sources 'nonsense'"):
        SourceLimits.from_config(GatewayConfig(unlimited_sources="10.0.0.0/8, nonsense"))
    with pytest.raises(ValueError, match="max_sessions_per_source"):
        GatewayConfig(max_sessions_per_source=-1)
