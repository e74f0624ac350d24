"""Who a caller is, by network address, for the limits one source may reach: live sessions
(:class:`SourceLimits`, counted by the door) and HTTP connections (``gateway.server.connection_cap``).

- **The source** of an HTTP request is its peer's address, or, when the peer is a trusted proxy
  (``trusted_proxies``: loopback by default, where ``deploy/nginx.conf`` runs), the last address of
  ``X-Forwarded-For`` that is not a trusted proxy (:func:`forwarded_client`: nginx *appends* the
  address it saw, so what a client wrote itself stays to the left and is never believed). A SIP
  call's source is its INVITE's source address.
- **One key per source** (:func:`source_key`): an IPv4 address, or the /64 network of an IPv6 one
  (one host commonly holds a whole /64); an IPv4-mapped IPv6 address counts as its IPv4 one.
- **Sources without a limit** (``unlimited_sources``, loopback by default): what legitimately
  carries many callers from one address: the load generator and bridges on this box (Janus,
  ``scripts/janus_bridge.py``, Kamailio/rtpengine), a SIP trunk, a company NAT. A client behind
  the loopback nginx is not loopback: its forwarded address is, and it is limited.

Addresses and networks are written as in ``sip_trusted``: comma-separated addresses or CIDR
networks (``127.0.0.0/8, ::1, 192.0.2.10``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from gateway.config import GatewayConfig

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPV6_SOURCE_PREFIX = 64  # an IPv6 source is its /64: one host (one customer line) commonly holds one


def parse_networks(text: str, setting: str) -> tuple[IpNetwork, ...]:
    """``"127.0.0.0/8, ::1, 192.0.2.10"`` -> the networks (an address alone is a /32 or /128);
    "" -> none. Raises ValueError naming ``setting`` and an entry that is neither an address
    nor a network."""
    networks = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{setting} {entry!r}: use IP addresses or CIDR networks, comma-separated") from None
    return tuple(networks)


def _address(text: str) -> Optional[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The IP address ``text`` names (brackets, a port and a zone dropped, IPv4-mapped as IPv4),
    else None. Some proxies write the client's port too (``203.0.113.7:51234``,
    ``[2001:db8::7]:51234``: Azure Application Gateway, IIS ARR): a new one each connection, so
    the port must not make a source of its own."""
    host = text.strip()
    if host.startswith("["):  # [IPv6] or [IPv6]:port
        host = host[1:].partition("]")[0]
    elif host.count(":") == 1:  # IPv4:port (an IPv6 address has two colons or more)
        host = host.partition(":")[0]
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def in_networks(address: str, networks: Iterable[IpNetwork]) -> bool:
    """Whether the IP ``address`` (an IPv4-mapped IPv6 one is taken as IPv4) is in ``networks``;
    False for anything that is not an IP address."""
    ip = _address(address)
    return ip is not None and any(ip.version == network.version and ip in network for network in networks)


def source_key(address: str) -> str:
    """The key a source is counted by: the IPv4 address, the IPv6 address's /64 network, or the
    text itself when it is no IP address (counted on its own, never exempt)."""
    ip = _address(address)
    if ip is None:
        return address
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/{IPV6_SOURCE_PREFIX}", strict=False))
    return str(ip)


def forwarded_client(peer: str, forwarded_for: Sequence[str], trusted: Sequence[IpNetwork]) -> str:
    """The client of a request from ``peer`` with the ``X-Forwarded-For`` header values
    ``forwarded_for``: ``peer`` unless it is a trusted proxy; then, from the right, the first hop
    that is not a trusted proxy (an entry that is no IP address stops the walk and is the client:
    limited, never exempt); all trusted: the leftmost."""
    hops = [hop.strip() for value in forwarded_for for hop in value.split(",") if hop.strip()]
    client = peer
    while in_networks(client, trusted) and hops:
        client = hops.pop()
    return client


@dataclass(frozen=True)
class SourceLimits:
    """The per-source limits of a gateway's settings: ``max_sessions`` (live sessions of one
    source, every transport together; 0: no limit), ``max_http_connections`` (open HTTP
    connections of one peer; 0: no limit), ``trusted_proxies`` (peers whose ``X-Forwarded-For``
    names the client) and ``unlimited`` (sources no limit applies to)."""

    max_sessions: int = 0
    max_http_connections: int = 0
    trusted_proxies: tuple[IpNetwork, ...] = ()
    unlimited: tuple[IpNetwork, ...] = ()

    @classmethod
    def from_config(cls, config: GatewayConfig) -> SourceLimits:
        """The limits of ``config``'s settings of those names. Raises ValueError for a list entry
        that is no address or network (the counts are checked by the config)."""
        return cls(
            config.max_sessions_per_source,
            config.max_http_connections_per_source,
            parse_networks(config.trusted_proxies, "trusted_proxies"),
            parse_networks(config.unlimited_sources, "unlimited_sources"),
        )

    def limited(self, source: Optional[str]) -> bool:
        """Whether ``source`` (None: unknown, or exempt by its transport) is held to the limits."""
        return source is not None and not in_networks(source, self.unlimited)

    def client(self, peer: Optional[str], forwarded_for: Sequence[str]) -> Optional[str]:
        """An HTTP request's source (:func:`forwarded_client`); None when the peer is unknown."""
        return None if peer is None else forwarded_client(peer, forwarded_for, self.trusted_proxies)
