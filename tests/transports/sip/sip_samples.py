"""SIP messages as real user agents send them (the INVITE is baresip 1.0's, captured on loopback;
the others follow RFC 3261's examples), for the parser tests and the fuzz. ``invite(...)`` and
friends fill in the addresses and ports of a test."""

from __future__ import annotations

BARESIP_SDP = (
    "v=0\r\n"
    "o=- 3596944745 589469585 IN IP4 127.0.0.1\r\n"
    "s=-\r\n"
    "c=IN IP4 {rtp_host}\r\n"
    "t=0 0\r\n"
    "a=tool:baresip 1.0.0\r\n"
    "m=audio {rtp_port} RTP/AVP 0 8 101\r\n"
    "a=rtpmap:0 PCMU/8000\r\n"
    "a=rtpmap:8 PCMA/8000\r\n"
    "a=rtpmap:101 telephone-event/8000\r\n"
    "a=fmtp:101 0-15\r\n"
    "a=sendrecv\r\n"
    "a=label:1\r\n"
    "a=rtcp-rsize\r\n"
    "a=ssrc:3163430677 cname:sip:caller@127.0.0.1\r\n"
    "a=minptime:20\r\n"
    "a=ptime:20\r\n"
)

# baresip 1.0 with ``mediaenc=srtp-mand`` (captured on loopback): RTP/SAVP and one SDES key
OFFERED_KEY = "zCIoFOVGyjmiyiTbWRi+K+o/alU2WZnsBTMa4dOd"  # the caller's SDES key in BARESIP_SRTP_SDP
BARESIP_SRTP_SDP = BARESIP_SDP.replace("RTP/AVP", "RTP/SAVP").replace(
    "a=minptime:20\r\n",
    f"a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{OFFERED_KEY}\r\na=minptime:20\r\n",
)
# baresip 1.0 with the opus and g711 modules (captured on loopback): Opus first
BARESIP_OPUS_SDP = BARESIP_SDP.replace("RTP/AVP 0 8 101", "RTP/AVP 96 0 8 101").replace(
    "a=rtpmap:0 PCMU/8000\r\n",
    "a=rtpmap:96 opus/48000/2\r\na=fmtp:96 stereo=1;sprop-stereo=1\r\na=rtpmap:0 PCMU/8000\r\n",
)


def invite(
    port: int,
    *,
    caller_port: int = 15070,
    branch: str = "z9hG4bK9d8481eb70f7749f",
    call_id: str = "d9c18dac2b108fb9",
    rtp_port: int = 20004,
    rtp_host: str = "127.0.0.1",
    cseq: int = 39457,
    extra: str = "",
    transport: str = "UDP",
    sdp: str = BARESIP_SDP,
) -> bytes:
    """baresip's INVITE to ``sip:agent@127.0.0.1:port`` (its SDP offer: ``sdp``, a template with
    ``{rtp_host}`` and ``{rtp_port}``)."""
    body = sdp.format(rtp_host=rtp_host, rtp_port=rtp_port)
    return (
        f"INVITE sip:agent@127.0.0.1:{port} SIP/2.0\r\n"
        f"Via: SIP/2.0/{transport} 127.0.0.1:{caller_port};branch={branch};rport\r\n"
        f"Contact: <sip:caller-0x562e96c30db0@127.0.0.1:{caller_port}>\r\n"
        "Max-Forwards: 70\r\n"
        f"To: <sip:agent@127.0.0.1:{port}>\r\n"
        "From: <sip:caller@127.0.0.1>;tag=a8d970bbab519d38\r\n"
        f"Call-ID: {call_id}\r\n"
        f"CSeq: {cseq} INVITE\r\n"
        "User-Agent: baresip v1.0.0 (x86_64/linux)\r\n"
        "Allow: INVITE,ACK,BYE,CANCEL,OPTIONS,NOTIFY,SUBSCRIBE,INFO,MESSAGE,REFER\r\n"
        "Supported:\r\n"
        f"{extra}"
        "Content-Type: application/sdp\r\n"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
        f"{body}"
    ).encode()


def in_dialog(
    method: str,
    port: int,
    to_tag: str,
    *,
    caller_port: int = 15070,
    branch: str = "z9hG4bKbye1",
    call_id: str = "d9c18dac2b108fb9",
    cseq: int = 39458,
    body: str = "",
    content_type: str = "",
    from_tag: str = "a8d970bbab519d38",
) -> bytes:
    """A request of the caller inside the dialog (BYE, INFO, OPTIONS...)."""
    typed = f"Content-Type: {content_type}\r\n" if content_type else ""
    return (
        f"{method} sip:voice-gateway@127.0.0.1:{port} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:{caller_port};branch={branch};rport\r\n"
        "Max-Forwards: 70\r\n"
        f"To: <sip:agent@127.0.0.1:{port}>;tag={to_tag}\r\n"
        f"From: <sip:caller@127.0.0.1>;tag={from_tag}\r\n"
        f"Call-ID: {call_id}\r\n"
        f"CSeq: {cseq} {method}\r\n"
        f"{typed}"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
        f"{body}"
    ).encode()


def ack(port: int, to_tag: str, *, branch: str, caller_port: int = 15070, cseq: int = 39457) -> bytes:
    """The caller's ACK (``branch``: the INVITE's for a non-2xx, a new one for a 2xx)."""
    return (
        f"ACK sip:agent@127.0.0.1:{port} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:{caller_port};branch={branch};rport\r\n"
        "Max-Forwards: 70\r\n"
        f"To: <sip:agent@127.0.0.1:{port}>;tag={to_tag}\r\n"
        "From: <sip:caller@127.0.0.1>;tag=a8d970bbab519d38\r\n"
        "Call-ID: d9c18dac2b108fb9\r\n"
        f"CSeq: {cseq} ACK\r\n"
        "Content-Length: 0\r\n"
        "\r\n"
    ).encode()


def cancel(port: int, *, caller_port: int = 15070, branch: str = "z9hG4bK9d8481eb70f7749f") -> bytes:
    """The caller's CANCEL of the INVITE of ``branch`` (RFC 3261 9.1: same branch, To without tag)."""
    return (
        f"CANCEL sip:agent@127.0.0.1:{port} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:{caller_port};branch={branch};rport\r\n"
        "Max-Forwards: 70\r\n"
        f"To: <sip:agent@127.0.0.1:{port}>\r\n"
        "From: <sip:caller@127.0.0.1>;tag=a8d970bbab519d38\r\n"
        "Call-ID: d9c18dac2b108fb9\r\n"
        "CSeq: 39457 CANCEL\r\n"
        "Content-Length: 0\r\n"
        "\r\n"
    ).encode()


def options(port: int, *, branch: str = "z9hG4bKopt1", max_forwards: int = 70) -> bytes:
    """An out-of-dialog OPTIONS (a trunk's keep-alive probe)."""
    return (
        f"OPTIONS sip:agent@127.0.0.1:{port} SIP/2.0\r\n"
        f"Via: SIP/2.0/UDP 127.0.0.1:15070;branch={branch}\r\n"
        f"Max-Forwards: {max_forwards}\r\n"
        f"To: <sip:agent@127.0.0.1:{port}>\r\n"
        "From: <sip:probe@127.0.0.1>;tag=probe1\r\n"
        "Call-ID: options-1@127.0.0.1\r\n"
        "CSeq: 1 OPTIONS\r\n"
        "Accept: application/sdp\r\n"
        "Content-Length: 0\r\n"
        "\r\n"
    ).encode()


# RFC 3261 24.2 style: a proxied INVITE with compact headers, a folded line and two Vias.
PROXIED_COMPACT = (
    b"INVITE sip:agent@127.0.0.1:5060 SIP/2.0\r\n"
    b"v: SIP/2.0/UDP 127.0.0.1:5080;branch=z9hG4bKnashds8;received=127.0.0.1\r\n"
    b"v: SIP/2.0/UDP 127.0.0.1:15070;branch=z9hG4bK776asdhds ;rport=15070\r\n"
    b"Max-Forwards: 69\r\n"
    b"Record-Route: <sip:127.0.0.1:5080;lr>\r\n"
    b"t: <sip:agent@127.0.0.1>\r\n"
    b'f: "Alice, at home" <sip:alice@127.0.0.1>\r\n'
    b"  ;tag=1928301774\r\n"
    b"i: a84b4c76e66710@pc33.example.com\r\n"
    b"CSeq: 314159 INVITE\r\n"
    b"m: <sip:alice@127.0.0.1:15070>, <sip:alice@127.0.0.2>\r\n"
    b"c: application/sdp\r\n"
    b"l: 4\r\n"
    b"\r\n"
    b"v=0\r\nextra"
)
