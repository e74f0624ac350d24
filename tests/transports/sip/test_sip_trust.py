"""Whom the SIP side believes (:mod:`gateway.transports.sip.trust`): the ``sip_trusted`` sources
(addresses and CIDR networks, IPv4-mapped IPv6 taken as IPv4) and the three RTP latch modes on a
real stream; unusable settings stop the user agent at start."""

from __future__ import annotations

import numpy as np
import pytest

from gateway.config import GatewayConfig
from gateway.media.g711 import encode_mulaw
from gateway.server.runner import free_port
from gateway.transports.sip.rtp import RtpPacket, RtpStream, build_rtp
from gateway.transports.sip.trust import is_trusted, latch_mode, latch_sources, trusted_networks
from gateway.transports.sip.user_agent import SipUserAgent
from tests.doubles import FullPoolDoorDouble


def test_trusted_sources_are_addresses_and_networks():
    networks = trusted_networks(" 127.0.0.0/8, ::1,192.0.2.10 ,2001:db8::/32,")
    assert len(networks) == 4
    for address in ("127.0.0.1", "127.9.9.9", "::1", "192.0.2.10", "2001:db8::5", "::ffff:192.0.2.10", "[::1]"):
        assert is_trusted(address, networks), address
    for address in ("192.0.2.11", "10.0.0.1", "::2", "2001:db9::1", "trunk.example.com", ""):
        assert not is_trusted(address, networks), address
    assert trusted_networks("") == () and not is_trusted("127.0.0.1", ())
    with pytest.raises(ValueError, match=r"sip_trusted 'trunk\.example\.com'"):
        trusted_networks("127.0.0.1, trunk.example.com")


@pytest.mark.parametrize(
    ("mode", "latches"),
    [
        ("signalling", {"signalling"}),
        ("sdp", {"signalling", "sdp"}),
        ("any", {"signalling", "sdp", "elsewhere"}),
    ],
)
def test_each_latch_mode_latches_to_its_sources_only(mode: str, latches: set[str]):
    # INVITE from 198.51.100.7, SDP c=192.0.2.66; RTP first from one of three places.
    places = {
        "signalling": ("198.51.100.7", 30000),
        "sdp": ("192.0.2.66", 4000),
        "elsewhere": ("203.0.113.5", 5004),
    }
    audio = encode_mulaw(np.zeros(160, np.int16))
    for place, source in places.items():
        stream = RtpStream(
            payload_type=0,
            telephone_event=None,
            remote=places["sdp"],
            rate=8000,
            trusted=latch_sources(latch_mode(mode), "198.51.100.7", "192.0.2.66"),
        )
        stream.received(build_rtp(RtpPacket(0, False, 1, 0, 7, audio)), source)
        assert stream.latched == (place in latches), (mode, place)
        assert stream.remote == (source if place in latches else places["sdp"])


@pytest.mark.parametrize(
    ("setting", "error"),
    [({"sip_trusted": "10.0.0.0/33"}, "sip_trusted"), ({"sip_rtp_latch": "sometimes"}, "sip_rtp_latch")],
)
def test_unusable_trust_settings_stop_the_user_agent(setting: dict[str, str], error: str):
    config = GatewayConfig(sip_port=free_port(), sip_host="127.0.0.1", **setting)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=error):
        SipUserAgent(config, FullPoolDoorDouble())
