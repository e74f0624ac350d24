"""SDP offers the hostile tests throw at ``POST /v1/realtime/calls``: written here from the RFCs
(RFC 8866 SDP, RFC 8829 JSEP, RFC 8839 ICE, RFC 8842 DTLS, RFC 8843 BUNDLE, RFC 4733
telephone-event) in the shapes real stacks send, plus mutations of them. None is copied from a
capture; ICE never connects for any of them (no peer behind the candidates)."""

from __future__ import annotations

import random
import secrets

FINGERPRINT = "a=fingerprint:sha-256 " + ":".join(f"{b:02X}" for b in secrets.token_bytes(32))


def _ice(tag: str) -> str:
    return f"a=ice-ufrag:{tag}uf\r\na=ice-pwd:{tag}pwd0123456789abcdefghij\r\n"


def _sdp(*lines: str) -> str:
    return "\r\n".join(lines) + "\r\n"


SESSION = ("v=0", "o=- 4611731400430051336 2 IN IP4 127.0.0.1", "s=-", "t=0 0")

CANDIDATE = "a=candidate:1 1 udp 2122260223 192.0.2.10 54400 typ host"


def offers() -> dict[str, str]:
    """Named offers, valid or not on purpose (``no_audio``)."""
    ice = _ice("x").strip().split("\r\n")
    return {
        # A FreeSWITCH/Asterisk bridge leg: session c=, no BUNDLE, no mid, RTP/SAVPF, static payload
        # types without rtpmap, telephone-event, ptime, a=setup:active, ssrc attributes.
        "sip_bridge": _sdp(
            *SESSION[:3],
            "c=IN IP4 192.0.2.10",
            "t=0 0",
            "m=audio 54400 RTP/SAVPF 0 8 101",
            "a=rtpmap:101 telephone-event/8000",
            "a=fmtp:101 0-16",
            "a=ptime:20",
            "a=sendrecv",
            "a=rtcp-mux",
            "a=rtcp:54400 IN IP4 192.0.2.10",
            FINGERPRINT,
            "a=setup:active",
            *ice,
            CANDIDATE,
            "a=end-of-candidates",
            "a=ssrc:12345 cname:bridge",
            "a=ssrc:12345 msid",
        ),
        # Chrome-like: BUNDLE of audio + video, extmap, RED, telephone-event at two rates, trickle
        # ICE (no candidates yet), session-level ice-options and msid-semantic.
        "chrome_like": _sdp(
            *SESSION,
            "a=group:BUNDLE 0 1",
            "a=extmap-allow-mixed",
            "a=msid-semantic: WMS",
            "m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126",
            "c=IN IP4 0.0.0.0",
            "a=rtcp:9 IN IP4 0.0.0.0",
            *ice,
            "a=ice-options:trickle",
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:0",
            "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level",
            "a=sendrecv",
            "a=msid:- track0",
            "a=rtcp-mux",
            "a=rtcp-rsize",
            "a=rtpmap:111 opus/48000/2",
            "a=rtcp-fb:111 transport-cc",
            "a=fmtp:111 minptime=10;useinbandfec=1",
            "a=rtpmap:63 red/48000/2",
            "a=fmtp:63 111/111",
            "a=rtpmap:9 G722/8000",
            "a=rtpmap:0 PCMU/8000",
            "a=rtpmap:8 PCMA/8000",
            "a=rtpmap:13 CN/8000",
            "a=rtpmap:110 telephone-event/48000",
            "a=rtpmap:126 telephone-event/8000",
            "a=ssrc:1001 cname:abc",
            "m=video 9 UDP/TLS/RTP/SAVPF 96 97",
            "c=IN IP4 0.0.0.0",
            *ice,
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:1",
            "a=sendrecv",
            "a=rtcp-mux",
            "a=rtpmap:96 VP8/90000",
            "a=rtcp-fb:96 nack",
            "a=rtcp-fb:96 nack pli",
            "a=rtpmap:97 rtx/90000",
            "a=fmtp:97 apt=96",
        ),
        # Firefox-like: session-level fingerprint, extmap with directions, a data channel too.
        "firefox_like": _sdp(
            *SESSION,
            FINGERPRINT,
            "a=group:BUNDLE 0 1",
            "a=ice-options:trickle",
            "a=msid-semantic:WMS *",
            "m=audio 9 UDP/TLS/RTP/SAVPF 109 9 0 8 101",
            "c=IN IP4 0.0.0.0",
            "a=sendrecv",
            "a=extmap:1/sendonly urn:ietf:params:rtp-hdrext:csrc",
            "a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1",
            "a=fmtp:101 0-15",
            *ice,
            "a=mid:0",
            "a=rtcp-mux",
            "a=rtpmap:109 opus/48000/2",
            "a=rtpmap:9 G722/8000/1",
            "a=rtpmap:0 PCMU/8000",
            "a=rtpmap:8 PCMA/8000",
            "a=rtpmap:101 telephone-event/8000",
            "a=setup:actpass",
            "a=ssrc:2002 cname:{ff}",
            "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
            "c=IN IP4 0.0.0.0",
            "a=sendrecv",
            *ice,
            "a=mid:1",
            "a=setup:actpass",
            "a=sctp-port:5000",
            "a=max-message-size:1073741823",
        ),
        # An ICE-lite peer (a media server): session-level a=ice-lite, ICE and DTLS attributes, a
        # c= line and a candidate with an mDNS .local name, setup:passive.
        "ice_lite_mdns": _sdp(
            *SESSION[:3],
            "t=0 0",
            "a=ice-lite",
            *ice,
            FINGERPRINT,
            "a=setup:passive",
            "m=audio 40000 UDP/TLS/RTP/SAVPF 111 0",
            "c=IN IP4 1f2e3d4c.local",
            "a=mid:a",
            "a=rtcp-mux",
            "a=sendrecv",
            "a=rtpmap:111 opus/48000/2",
            "a=rtpmap:0 PCMU/8000",
            "a=candidate:1 1 udp 2130706431 1f2e3d4c.local 40000 typ host",
            "a=end-of-candidates",
        ),
        # BUNDLE over four m-lines: audio, video, a second audio, a data channel.
        "bundle_many": _sdp(
            *SESSION,
            "a=group:BUNDLE a v a2 d",
            "m=audio 9 UDP/TLS/RTP/SAVPF 0",
            "c=IN IP4 0.0.0.0",
            *ice,
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:a",
            "a=rtcp-mux",
            "a=sendrecv",
            "a=rtpmap:0 PCMU/8000",
            "m=video 9 UDP/TLS/RTP/SAVPF 96",
            "c=IN IP4 0.0.0.0",
            *ice,
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:v",
            "a=rtcp-mux",
            "a=recvonly",
            "a=rtpmap:96 VP8/90000",
            "m=audio 9 UDP/TLS/RTP/SAVPF 8",
            "c=IN IP4 0.0.0.0",
            *ice,
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:a2",
            "a=rtcp-mux",
            "a=sendonly",
            "a=rtpmap:8 PCMA/8000",
            "m=application 9 UDP/DTLS/SCTP webrtc-datachannel",
            "c=IN IP4 0.0.0.0",
            *ice,
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:d",
            "a=sctp-port:5000",
            CANDIDATE,
        ),
        # GStreamer webrtcbin's shape: mids audio0, rtcp-mux-only, transport-cc feedback.
        "gstreamer_like": _sdp(
            *SESSION,
            "a=ice-options:trickle",
            "a=group:BUNDLE audio0",
            "m=audio 9 UDP/TLS/RTP/SAVPF 0 101",
            "c=IN IP4 0.0.0.0",
            "a=setup:actpass",
            *ice,
            "a=rtcp-mux",
            "a=rtcp-rsize",
            "a=sendrecv",
            "a=rtpmap:0 PCMU/8000",
            "a=rtcp-fb:0 transport-cc",
            "a=rtpmap:101 telephone-event/8000",
            "a=mid:audio0",
            FINGERPRINT,
            "a=rtcp-mux-only",
            CANDIDATE,
        ),
        # No audio m-line: video only (a clear 400).
        "no_audio": _sdp(
            *SESSION,
            "m=video 9 UDP/TLS/RTP/SAVPF 96",
            "c=IN IP4 0.0.0.0",
            *ice,
            FINGERPRINT,
            "a=setup:actpass",
            "a=mid:0",
            "a=rtcp-mux",
            "a=rtpmap:96 VP8/90000",
        ),
    }


def mutations(sdp: str, rng: random.Random, count: int) -> list[tuple[str, str]]:
    """``count`` (name, offer) mutations of ``sdp``: a line dropped, doubled or garbled, the text
    cut short, LF line ends, junk lines, a huge line, unusual values."""
    lines = sdp.rstrip("\r\n").split("\r\n")
    junk = [
        "a=",
        "=",
        "m=",
        "a=rtpmap:",
        "a=fmtp:abc",
        "a=candidate:garbage",
        "x" * 300,
        "a=setup:",
        "a=ssrc:notanumber cname:x",
        "a=rtcp:port",
        "a=extmap:1 uri extra attrs",
        "c=IN IP9 ::1",
        "a=group:BUNDLE nosuchmid",
        "a=mid:",
        "a=rtpmap:300 X/8000",
        "m=audio 9 RTP/SAVPF",
        "m=audio 9/2 RTP/SAVPF 0",
        "a=rtpmap:0 PCMU/eight",
        "a=sctp-port:-1",
        "\x00\x01\x02",
        "é=ü",
        "a=fingerprint:sha-256",
        "a=ice-pwd",
        "a=rtcp-fb:0",
        "a=sctpmap:x y",
        "a=max-message-size:big",
    ]
    out: list[tuple[str, str]] = []
    for n in range(count):
        kind = rng.choice(["drop", "double", "garble", "cut", "lf", "junk", "huge", "swap"])
        mutated = list(lines)
        i = rng.randrange(len(mutated))
        if kind == "drop":
            del mutated[i]
        elif kind == "double":
            mutated.insert(i, mutated[i])
        elif kind == "garble":
            head = mutated[i][:2]
            mutated[i] = head + "".join(rng.choice("ab:=/ 0123456789-\t") for _ in range(rng.randrange(1, 40)))
        elif kind == "junk":
            mutated.insert(i, rng.choice(junk))
        elif kind == "huge":
            mutated.insert(i, "a=x-huge:" + "y" * 20000)
        elif kind == "swap":
            j = rng.randrange(len(mutated))
            mutated[i], mutated[j] = mutated[j], mutated[i]
        text = "\r\n".join(mutated) + "\r\n"
        if kind == "cut":
            text = text[: rng.randrange(1, len(text))]
        elif kind == "lf":
            text = text.replace("\r\n", "\n")
        out.append((f"{kind}#{n}@{i}", text))
    return out
