"""The UAS side of a SIP dialog (RFC 3261 12.1.1, 12.2.1.1): what the caller's INVITE fixed (Call-ID,
the tags, the caller's Contact as remote target, the Record-Route set), and the in-dialog
requests the gateway sends (BYE, REFER) built from it, routed by the route set (loose routing,
RFC 3261 16.12: the first Route's address is the next hop) or to the remote target.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from gateway.transports.sip.message import (
    DEFAULT_MAX_FORWARDS,
    SipParseError,
    SipRequest,
    parse_name_addr,
    parse_uri,
)
from gateway.transports.sip.transactions import new_branch

_DEFAULT_PORTS = {"UDP": 5060, "TCP": 5060, "TLS": 5061}


@dataclass
class Dialog:
    """``call_id`` (the SIP Call-ID), ``local_tag`` (ours, the To tag), ``local`` (the INVITE's To
    without a tag: our address of record), ``remote`` (the From value, with the caller's tag),
    ``remote_target`` (the caller's Contact URI), ``route_set`` (the INVITE's Record-Route values in
    order), ``transport`` (UDP/TCP/TLS, as the INVITE came), ``contact`` (our Contact value),
    ``via_host`` / ``via_port`` (our address as others reach it)."""

    call_id: str
    local_tag: str
    local: str
    remote: str
    remote_target: str
    route_set: list[str]
    transport: str
    contact: str
    via_host: str
    via_port: int
    local_cseq: int = field(default_factory=lambda: secrets.randbelow(2**20) + 1)

    @classmethod
    def from_invite(cls, invite: SipRequest, transport: str, host: str, port: int) -> Dialog:
        """The dialog an INVITE makes, answered from ``host``:``port`` over ``transport``. Raises
        SipParseError when its From, To, Contact or a Record-Route cannot be read, or is not a SIP
        URI with a usable port (the caller answers 400: BYE and REFER could not be routed)."""
        to = parse_name_addr(invite.get("To") or "")
        parse_name_addr(invite.get("From") or "")  # raises for a malformed From
        contacts = invite.get_all("Contact")
        if not contacts:
            raise SipParseError("INVITE without Contact")
        remote_target = parse_name_addr(contacts[0]).uri
        route_set = list(invite.get_all("Record-Route"))
        for uri in [remote_target, *(parse_name_addr(route).uri for route in route_set)]:
            hop_port = parse_uri(uri).port
            if hop_port is not None and not 0 < hop_port < 65536:
                raise SipParseError(f"port {hop_port} in {uri!r}")
        param = f";transport={transport.lower()}" if transport in ("TCP", "TLS") else ""
        host_text = f"[{host}]" if ":" in host else host
        return cls(
            call_id=invite.call_id,
            local_tag=secrets.token_hex(8),
            local=f"<{to.uri}>",
            remote=invite.get("From") or "",
            remote_target=remote_target,
            route_set=route_set,
            transport=transport,
            contact=f"<sip:voice-gateway@{host_text}:{port}{param}>",
            via_host=host_text,
            via_port=port,
        )

    @property
    def remote_tag(self) -> str:
        """The caller's From tag (RFC 3261 12.2.2: part of the dialog ID); empty when it sent none."""
        try:
            return parse_name_addr(self.remote).tag
        except SipParseError:
            return ""

    @property
    def local_uri(self) -> str:
        """Our address of record as a URI (no angle brackets)."""
        return self.local.strip("<>")

    def request(self, method: str) -> SipRequest:
        """A new in-dialog request (RFC 3261 12.2.1.1): Request-URI the remote target, the route set
        as Route, the next local CSeq, a fresh branch."""
        self.local_cseq += 1
        request = SipRequest(method=method, uri=self.remote_target)
        request.add("Via", f"SIP/2.0/{self.transport} {self.via_host}:{self.via_port};branch={new_branch()};rport")
        request.add("Max-Forwards", str(DEFAULT_MAX_FORWARDS))
        request.add("From", f"{self.local};tag={self.local_tag}")
        request.add("To", self.remote)
        request.add("Call-ID", self.call_id)
        request.add("CSeq", f"{self.local_cseq} {method}")
        for route in self.route_set:
            request.add("Route", route)
        request.add("Contact", self.contact)
        return request

    def next_hop(self) -> tuple[str, tuple[str, int]]:
        """(transport, (host, port)) of the next hop: the first Route's URI, else the remote
        target; a ``transport=`` URI parameter wins over the dialog's transport. Raises
        SipParseError for a URI that is not SIP."""
        uri = parse_uri(parse_name_addr(self.route_set[0]).uri if self.route_set else self.remote_target)
        transport = uri.params.get("transport", self.transport).upper()
        if transport not in _DEFAULT_PORTS:
            transport = self.transport
        if uri.scheme == "sips":  # TLS whatever the parameter says (RFC 3261 19.1.2, 26.2.2)
            transport = "TLS"
        host = uri.host.strip("[]")
        return transport, (host, uri.port or _DEFAULT_PORTS[transport])
