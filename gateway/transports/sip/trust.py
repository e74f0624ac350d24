"""Whom the SIP side believes: the sources whose INVITE is answered without a webhook, and the
addresses whose RTP may set where a call's media goes (the latch, ``gateway.transports.sip.rtp``).

A UDP source address proves nothing: anyone can send an INVITE that seems to come from the trunk.
So without a webhook (no application deciding) a call is accepted only from ``sip_trusted``
(addresses and CIDR networks, comma-separated; loopback by default); any other INVITE gets ``403``
and claims no unit. With a webhook the application decides whom to accept, as before.

RTP latching (RFC 4961 symmetric RTP; ``sip_rtp_latch``):

- ``signalling`` (the default): only RTP from the IP address the INVITE came from may latch. A
  phone, a PBX or a trunk that sends media from its signalling address works; a spoofed INVITE
  naming someone else's address in its SDP ``c=`` line cannot make that address the media's
  destination.
- ``sdp``: also from the SDP's ``c=`` address, for a trunk or a proxy whose media comes from other
  addresses than its signalling (media relays, a proxy without one). Safe with TCP/TLS signalling
  (a connection's source cannot be forged); over UDP a forged INVITE names the ``c=`` it likes.
- ``any``: the first valid RTP packet from anywhere, for a phone behind NAT that reaches the
  gateway through an SBC relaying only its signalling: its RTP comes from the NAT's public address,
  which is neither the SBC's nor the private ``c=``. Whoever sends first to the port takes the
  call's audio: open the RTP range only to the media addresses you expect.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from gateway.transports.sources import IpNetwork, in_networks, parse_networks

LATCH_MODES = ("signalling", "sdp", "any")


def trusted_networks(text: str) -> tuple[IpNetwork, ...]:
    """``"127.0.0.0/8, ::1, 192.0.2.10"`` -> the networks (an address alone is a /32 or /128);
    "" -> none. Raises ValueError naming an entry that is neither an address nor a network."""
    return parse_networks(text, "sip_trusted")


def is_trusted(address: str, networks: Iterable[IpNetwork]) -> bool:
    """Whether the IP ``address`` (an IPv4-mapped IPv6 one is taken as IPv4) is in ``networks``;
    False for anything that is not an IP address."""
    return in_networks(address, networks)


def latch_mode(text: str) -> str:
    """``sip_rtp_latch`` checked: one of :data:`LATCH_MODES`. Raises ValueError."""
    mode = text.strip().lower()
    if mode not in LATCH_MODES:
        raise ValueError(f"sip_rtp_latch {text!r}: use {', '.join(LATCH_MODES)}")
    return mode


def latch_sources(mode: str, signalling: str, sdp_address: str) -> Optional[tuple[str, ...]]:
    """The IP addresses whose RTP may latch a call (None: any), for the ``mode`` (see the module),
    the INVITE's source IP ``signalling`` and the SDP's ``c=`` address."""
    if mode == "any":
        return None
    if mode == "sdp":
        return (signalling, sdp_address)
    return (signalling,)
