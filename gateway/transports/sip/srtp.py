"""SDES-SRTP for a SIP call: the keys exchanged in the SDP (RFC 4568 ``a=crypto``) and the packets
protected and checked with libsrtp (``pylibsrtp``, the binding aiortc uses for DTLS-SRTP).

- **An offer's keys** (:func:`choose_crypto`): each ``a=crypto:<tag> <crypto-suite> <key-params>
  [<session-params>]`` line of the audio stream (RFC 4568 9.1), in the offer's order of
  preference; the first whose suite is one of :data:`SUITES` and whose one key is usable is
  answered. A key is ``inline:<base64 of master key || master salt>[|<lifetime>]`` (6.1), exactly
  the suite's length. Not answered: a line with a master key identifier (``|MKI:length``, or
  several keys: each packet would carry the MKI) or a session parameter other than the window size
  hint ``WSH`` (6.3: unencrypted or unauthenticated SRTP, another key derivation rate, FEC order).
- **The answer** (:attr:`SdesKeys.answer`): the same tag and suite with the gateway's own key, made
  for each call by :mod:`secrets`: each side encrypts with its own key (RFC 4568 6.1), so the
  caller's key checks what comes in and ours protects what goes out.
- **Packets** (:class:`SrtpContext`): an inbound libsrtp session for any SSRC with the caller's
  key, an outbound one with ours. A packet that fails authentication (a wrong key, a forged or
  corrupted packet) or the replay check is dropped and counted, never decoded: libsrtp keeps a
  stream for a new SSRC only once one of its packets has authenticated.
- **New keys in a re-INVITE** (:meth:`SrtpContext.rekey`, RFC 4568 7.1.4): the caller's new key
  checks what comes in from then on; packets still in flight under its previous key are accepted
  until the first one under the new key authenticates. The gateway keeps its own key (and its
  outbound stream) unless the suite changes.
- **A new stream** (``SrtpContext.rekey(..., new_stream=True)``: one brought back after port 0 or added in place
  of the call's, RFC 3264 8.2): a new inbound session, the same key or a new one. The caller's
  new stream may start its sequence numbers again under the same key and SSRC (a bridge's new
  leg, a phone that re-creates its stream); the old session's replay list would take those for
  replays of packets already seen and drop them all (the call deaf).
- **RTCP**: the gateway sends none (nor SRTCP); an SRTCP packet arriving on the RTP port counts for
  the caller's presence only once it authenticates (:meth:`SrtpContext.unprotect_rtcp`).

Keys never appear in logs, reprs or error messages.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Optional

import pylibsrtp
from pylibsrtp import Policy, Session


@dataclass(frozen=True)
class CryptoSuite:
    """One SRTP crypto suite as SDP names it (``name``), its libsrtp ``profile`` and the length of
    its master key plus master salt (``key_length``, bytes)."""

    name: str
    profile: int
    key_length: int


def _suites() -> tuple[CryptoSuite, ...]:
    """The suites this libsrtp can run (RFC 4568 6.2.1, RFC 7714 14.2; AES-GCM only where libsrtp
    was built with it)."""
    known = (
        ("AES_CM_128_HMAC_SHA1_80", Policy.SRTP_PROFILE_AES128_CM_SHA1_80),
        ("AES_CM_128_HMAC_SHA1_32", Policy.SRTP_PROFILE_AES128_CM_SHA1_32),
        ("AEAD_AES_128_GCM", Policy.SRTP_PROFILE_AEAD_AES_128_GCM),
        ("AEAD_AES_256_GCM", Policy.SRTP_PROFILE_AEAD_AES_256_GCM),
    )
    suites = []
    for name, profile in known:
        try:
            Policy(srtp_profile=profile)
        except pylibsrtp.Error:  # pragma: no cover - a libsrtp without AES-GCM
            continue
        length = pylibsrtp.lib.srtp_profile_get_master_key_length(profile)
        length += pylibsrtp.lib.srtp_profile_get_master_salt_length(profile)
        suites.append(CryptoSuite(name, profile, length))
    return tuple(suites)


SUITES: tuple[CryptoSuite, ...] = _suites()
_BY_NAME = {suite.name: suite for suite in SUITES}
# Session parameters that change nothing here (RFC 4568 6.3.7: a hint for the replay window).
_HARMLESS_SESSION_PARAMETERS = ("WSH=",)


class SdesError(ValueError):
    """No ``a=crypto`` line of the offer can be answered; the message says why (never a key)."""


@dataclass(frozen=True)
class SdesKeys:
    """The SRTP of one call: the ``tag`` and ``suite`` of the offer's ``a=crypto`` line answered,
    ``remote_key`` (the caller's master key || salt: what it sends is checked with it) and
    ``local_key`` (the gateway's, made for this call: what it sends is protected with it). The
    keys stay out of the repr."""

    tag: str
    suite: CryptoSuite
    remote_key: bytes = field(repr=False)
    local_key: bytes = field(repr=False)

    @property
    def answer(self) -> str:
        """The answer's attribute value: ``<tag> <suite> inline:<base64 of our key || salt>``."""
        return f"{self.tag} {self.suite.name} inline:{base64.b64encode(self.local_key).decode()}"


def read_crypto(value: str) -> tuple[str, CryptoSuite, bytes]:
    """One ``a=crypto`` value -> (tag, suite, master key || salt). Raises SdesError naming what
    cannot be answered (see the module docstring)."""
    fields = value.split()
    if len(fields) < 3 or not fields[0].isascii() or not fields[0].isdigit() or len(fields[0]) > 10:
        raise SdesError("an a=crypto line is not '<tag> <crypto-suite> inline:<key>' (RFC 4568 9.1)")
    tag, name, key_params, session_params = fields[0], fields[1], fields[2], fields[3:]
    suite = _BY_NAME.get(name)
    if suite is None:
        raise SdesError(f"crypto suite {name[:40]!r} not supported (use {', '.join(_BY_NAME)})")
    for parameter in session_params:
        if not parameter.startswith(_HARMLESS_SESSION_PARAMETERS):
            raise SdesError(f"SDES session parameter {parameter.split('=')[0][:30]!r} not supported")
    if ";" in key_params:
        raise SdesError("several SDES keys (with master key identifiers) are not supported")
    method, _, key_info = key_params.partition(":")
    if method != "inline":
        raise SdesError("an SDES key must be given 'inline:' (RFC 4568 6.1)")
    key_salt, *extra = key_info.split("|")
    if any(":" in part for part in extra) or len(extra) > 1:
        raise SdesError("an SDES master key identifier (MKI) is not supported")
    try:
        key = base64.b64decode(key_salt, validate=True)
    except (binascii.Error, ValueError):
        raise SdesError("an SDES key is not base64") from None
    if len(key) != suite.key_length:
        raise SdesError(f"an SDES key of {suite.name} has {suite.key_length} bytes, not {len(key)}")
    return tag, suite, key


def choose_crypto(values: list[Optional[str]]) -> SdesKeys:
    """The keys of the first ``a=crypto`` value (of one m-section, in the offer's order) that can
    be answered, with a new key of our own. Raises SdesError: no line, or why the first cannot be."""
    first: Optional[SdesError] = None
    for value in values:
        try:
            tag, suite, remote_key = read_crypto(value or "")
        except SdesError as exc:
            first = first or exc
            continue
        return SdesKeys(tag, suite, remote_key, secrets.token_bytes(suite.key_length))
    raise first or SdesError("no a=crypto key offered")


class SrtpContext:
    """The libsrtp sessions of one call (see the module docstring). ``rejected`` counts the
    packets that failed authentication, ``replayed`` those refused by the replay check;
    ``last_drop`` says which the last one dropped was (``authentication`` or ``replay``)."""

    def __init__(self, keys: SdesKeys) -> None:
        profile = keys.suite.profile
        self.keys = keys
        self._inbound = Session(Policy(keys.remote_key, Policy.SSRC_ANY_INBOUND, srtp_profile=profile))
        self._outbound = Session(Policy(keys.local_key, Policy.SSRC_ANY_OUTBOUND, srtp_profile=profile))
        self._previous: Optional[Session] = None  # the caller's last key, until its new one is used
        self.rejected = 0
        self.replayed = 0
        self.last_drop = ""

    def rekey(self, keys: SdesKeys, *, new_stream: bool = False) -> None:
        """Use ``keys`` (a re-INVITE's, see the module docstring): the caller's new key for what
        comes in, the previous one still accepted until a packet under the new one authenticates;
        a new outbound stream only when our key or the suite changed. ``new_stream``: the
        caller's stream is a new one (added, or brought back after port 0): a new inbound session
        whatever the key (no replay list, no previous key)."""
        profile = keys.suite.profile
        if new_stream:
            self._previous = None
            self._inbound = Session(Policy(keys.remote_key, Policy.SSRC_ANY_INBOUND, srtp_profile=profile))
        elif keys.remote_key != self.keys.remote_key or keys.suite != self.keys.suite:
            self._previous = self._inbound
            self._inbound = Session(Policy(keys.remote_key, Policy.SSRC_ANY_INBOUND, srtp_profile=profile))
        if keys.local_key != self.keys.local_key or keys.suite != self.keys.suite:
            self._outbound = Session(Policy(keys.local_key, Policy.SSRC_ANY_OUTBOUND, srtp_profile=profile))
        self.keys = keys

    def protect(self, packet: bytes) -> bytes:
        """An RTP packet -> its SRTP form (encrypted payload, authentication tag)."""
        return self._outbound.protect(packet)

    def unprotect(self, packet: bytes) -> Optional[bytes]:
        """An SRTP packet -> the RTP packet, None (counted) when it fails authentication or replay."""
        return self._check(lambda session: session.unprotect(packet))

    def unprotect_rtcp(self, packet: bytes) -> Optional[bytes]:
        """An SRTCP packet -> the RTCP packet, None (counted) when it fails authentication or replay."""
        return self._check(lambda session: session.unprotect_rtcp(packet))

    def _check(self, unprotect: Callable[[Session], bytes]) -> Optional[bytes]:
        clear, replayed = _open(unprotect, self._inbound)
        if clear is not None:
            self._previous = None  # the caller uses its new key: the old one is done
            return clear
        if self._previous is not None:
            clear, _ = _open(unprotect, self._previous)
            if clear is not None:
                return clear
        if replayed:
            self.replayed += 1
        else:
            self.rejected += 1
        self.last_drop = "replay" if replayed else "authentication"
        return None


def _open(unprotect: Callable[[Session], bytes], session: Session) -> tuple[Optional[bytes], bool]:
    """(the packet ``session`` opened, False), or (None, whether it failed the replay check rather
    than authentication)."""
    try:
        return bytes(unprotect(session)), False
    except pylibsrtp.Error as exc:
        return None, str(exc).startswith("replay check failed")
    except ValueError:  # longer than libsrtp's buffer: no packet of a call
        return None, False
