"""Two groups of the gateway's settings, each a dataclass that :class:`gateway.config.GatewayConfig`
inherits (so each field is a ``--flag`` and a ``VG_*`` variable like any other, see
``gateway.config``): what one source (an address) or one call may hold of the gateway
(:class:`SourceLimitSettings`, read by ``gateway.transports.sources`` and the sideband route),
and the call recordings, with the bounds of the disk they may take (:class:`RecordingSettings`,
read by ``gateway.transports.call_record``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

LOOPBACK = "127.0.0.0/8,::1"
GIB = 1024**3


@dataclass
class SourceLimitSettings:
    """What one source (a client's address: ``gateway.transports.sources``) may hold at once, and
    one call of its sidebands (``gateway.server.websocket_routes``: behind a proxy every sideband
    comes from one address, so the per-source connection cap does not count them)."""

    max_sessions_per_source: int = field(
        default=2,
        metadata={
            "help": "live sessions (WebRTC calls, Realtime WebSockets, SIP calls, together) one source address (an "
            "IPv6 /64) may hold; more get 429 too_many_sessions (SIP: 503); 0: no limit"
        },
    )
    max_http_connections_per_source: int = field(
        default=32,
        metadata={
            "help": "open HTTP connections one peer address may hold; more are answered 429 and closed at once; "
            "0: no limit (a trusted proxy's are not counted)"
        },
    )
    max_sidebands_per_call: int = field(
        default=4,
        metadata={
            "help": "sideband WebSockets (GET /v1/realtime?call_id=...) one call may have attached at once, "
            "whatever their source; more get 429 too_many_sidebands before the upgrade; 0: no limit"
        },
    )
    trusted_proxies: str = field(
        default=LOOPBACK,
        metadata={
            "help": "proxies (addresses/CIDR networks, comma-separated) whose X-Forwarded-For names the client: "
            "its last hop that is not one of them is the request's source; empty: the peer always is"
        },
    )
    unlimited_sources: str = field(
        default=LOOPBACK,
        metadata={
            "help": "sources (addresses/CIDR networks, comma-separated) no per-source limit applies to: this box "
            "(load generator, bridges), a SIP trunk, an office NAT; empty: none"
        },
    )


@dataclass
class RecordingSettings:
    """Call recordings (``gateway.transports.call_record``; off unless ``record_dir`` is set)."""

    record_dir: str = field(
        default="",
        metadata={
            "help": "directory for call recordings (<call id>.wav, stereo: caller left, assistant right) and "
            "reports (<call id>.json); empty: no call is recorded and a session asking for it gets an error"
        },
    )
    record_all_calls: bool = field(
        default=False,
        metadata={"help": "record every call (needs record_dir); off: only sessions that ask ('recording': true)"},
    )
    record_retention_days: float = field(
        default=30.0,
        metadata={"help": "recordings older than this are deleted (at start and whenever one is written); 0: kept"},
    )
    record_max_calls: int = field(
        default=0, metadata={"help": "keep at most this many recorded calls, the oldest deleted first; 0: no limit"}
    )
    record_dtmf_digits: bool = field(
        default=False,
        metadata={
            "help": "keep DTMF digits in the logs and call reports; off: each key press shows as '*' there (keys "
            "may spell PINs and card numbers); the session, its client and the model get the digits either way"
        },
    )

    record_max_bytes: int = field(
        default=4 * GIB,
        metadata={
            "help": "a session asking for a recording is refused (recording_unavailable) while the recordings in "
            "record_dir take this many bytes or more (record_all_calls: only record_min_free_bytes); 0: no limit"
        },
    )
    record_min_free_bytes: int = field(
        default=GIB,
        metadata={
            "help": "no new recording starts (a session asking gets recording_unavailable; record_all_calls: the "
            "call goes unrecorded, logged) while the record_dir disk has fewer bytes free; 0: no floor"
        },
    )
