"""The SIP settings of :class:`~gateway.config.GatewayConfig` (``sip_*``), parsed and checked in one
place: by ``voice-gateway serve`` before the models load (a setting SIP cannot use stops the start
in one line, exit 2) and by the user agent when it starts (:class:`SipSettings`)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Optional

from gateway.config import GatewayConfig
from gateway.transports.sip.message import is_digits
from gateway.transports.sip.sdp import srtp_setting
from gateway.transports.sip.transport import server_tls_context
from gateway.transports.sip.trust import latch_mode, trusted_networks
from gateway.transports.sip.webhook import signing_key
from gateway.transports.sources import IpNetwork


def rtp_port_range(text: str) -> Optional[tuple[int, int]]:
    """``"10000-20000"`` -> (10000, 20000); "" -> None (ephemeral ports). Raises ValueError."""
    if not text.strip():
        return None
    first, dash, last = text.partition("-")
    if not (dash and is_digits(first.strip()) and is_digits(last.strip())):
        raise ValueError(f"sip_rtp_ports {text!r}: use 'first-last', e.g. 10000-20000")
    low, high = int(first), int(last)
    if not 1024 <= low < high <= 65535:
        raise ValueError(f"sip_rtp_ports {text!r}: a range within 1024..65535")
    return low, high


@dataclass(frozen=True)
class SipSettings:
    """``host``: the address SIP and RTP listen on (``sip_host``, else the HTTP host);
    ``public_address``: put in Contact and SDP; ``tls``: the server context of SIP over TLS (None:
    no TLS); ``rtp_ports``: the RTP port range (None: ephemeral); ``trusted``: the ``sip_trusted``
    networks; ``rtp_latch``: a mode of ``gateway.transports.sip.trust``; ``srtp``: a setting of
    ``gateway.transports.sip.sdp``."""

    host: str
    public_address: str
    tls: Optional[ssl.SSLContext]
    rtp_ports: Optional[tuple[int, int]]
    trusted: tuple[IpNetwork, ...]
    rtp_latch: str
    srtp: str

    @classmethod
    def from_config(cls, config: GatewayConfig) -> SipSettings:
        """Raises ValueError naming the setting SIP cannot use: the RTP port range, trusted sources,
        RTP latch mode, SRTP setting, webhook secret, no public address for a wildcard host, a TLS
        certificate or key that cannot be loaded. Reads the TLS files; binds nothing."""
        host = config.sip_host or config.host
        public_address = config.sip_public_address or host
        if public_address in ("0.0.0.0", "::"):
            raise ValueError("SIP listens on every address: give --sip-public-address (put in Contact and SDP)")
        if config.sip_webhook_url and config.sip_webhook_secret:
            try:
                signing_key(config.sip_webhook_secret)
            except ValueError as exc:
                raise ValueError(f"sip_webhook_secret: {exc}") from None
        return cls(
            host=host,
            public_address=public_address,
            tls=server_tls_context(config.sip_tls_cert, config.sip_tls_key) if config.sip_tls_cert else None,
            rtp_ports=rtp_port_range(config.sip_rtp_ports),
            trusted=trusted_networks(config.sip_trusted),
            rtp_latch=latch_mode(config.sip_rtp_latch),
            srtp=srtp_setting(config.sip_srtp),
        )
