"""ICE configuration of the gateway's peer connections: the STUN/TURN servers (RFC 8489 STUN,
RFC 8656 TURN, URIs per RFC 7064 / RFC 7065) of the ``ice_servers`` setting, checked the way aiortc
reads them (``RTCConfiguration`` / ``RTCIceServer`` of the W3C WebRTC API, section 4.2).

``ice_servers`` is either JSON in the ``RTCIceServer`` shape, a list (or one object) of
``{"urls": "turn:host:3478" | [...], "username": "...", "credential": "..."}``, or comma-separated
URLs sharing ``ice_username`` / ``ice_credential``. Empty: no server at all (host candidates only;
there is no default public STUN server, unlike aiortc's own default). aiortc uses the first STUN
and the first TURN URL it can (``turn:`` over udp or tcp, ``turns:`` over tcp); the others are
accepted and ignored.
"""

from __future__ import annotations

import json
from typing import Any

from aiortc import RTCConfiguration, RTCIceServer
from aiortc.rtcicetransport import parse_stun_turn_uri

from gateway.config import GatewayConfig


def ice_servers(config: GatewayConfig) -> list[RTCIceServer]:
    """The ``RTCIceServer`` list of ``config.ice_servers`` (see the module docstring); [] when unset.

    Raises ValueError (message starting ``ice_servers:``) for JSON of another shape, a URL aiortc
    would reject (at the first call, after a unit was claimed), or a TURN server without a username
    and credential (which aiortc would silently skip).
    """
    text = config.ice_servers.strip()
    if not text:
        return []
    if text[0] in "[{":
        servers = [_server_from_json(entry) for entry in _json_entries(text)]
    else:
        urls = [url.strip() for url in text.split(",") if url.strip()]
        servers = [
            RTCIceServer(urls=urls, username=config.ice_username or None, credential=config.ice_credential or None)
        ]
    for server in servers:
        _check_server(server)
    return servers


def ice_configuration(config: GatewayConfig) -> RTCConfiguration:
    """The RTCPeerConnection configuration: :func:`ice_servers` (never aiortc's default public
    STUN server). Raises ValueError as :func:`ice_servers` does."""
    return RTCConfiguration(iceServers=ice_servers(config))


def _json_entries(text: str) -> list[Any]:
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"ice_servers: not valid JSON ({exc})") from None
    entries = parsed if isinstance(parsed, list) else [parsed]
    if not entries:
        raise ValueError("ice_servers: the JSON list is empty (leave ice_servers unset for no server)")
    return entries


def _server_from_json(entry: Any) -> RTCIceServer:
    """One ``RTCIceServer`` dictionary: ``urls`` (a string or a list of strings), optional
    ``username`` and ``credential`` (strings)."""
    shape = 'each entry must be {"urls": "<url>" or ["<url>", ...], "username"?: "...", "credential"?: "..."}'
    if not isinstance(entry, dict):
        raise ValueError(f"ice_servers: {shape}")
    urls = entry.get("urls")
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not urls or not all(isinstance(url, str) and url.strip() for url in urls):
        raise ValueError(f"ice_servers: {shape}")
    username, credential = entry.get("username"), entry.get("credential")
    if not all(value is None or isinstance(value, str) for value in (username, credential)):
        raise ValueError(f"ice_servers: {shape}")
    return RTCIceServer(urls=[url.strip() for url in urls], username=username or None, credential=credential or None)


def _check_server(server: RTCIceServer) -> None:
    urls = server.urls if isinstance(server.urls, list) else [server.urls]
    for url in urls:
        try:
            parsed = parse_stun_turn_uri(url)
        except ValueError as exc:
            raise ValueError(
                f"ice_servers: {url!r} is not a STUN/TURN URL ({exc}), "
                "e.g. stun:stun.example.org:3478 or turn:turn.example.org:3478?transport=tcp"
            ) from None
        if parsed["scheme"] in ("turn", "turns") and not (server.username and server.credential):
            raise ValueError(
                f"ice_servers: {url!r} is a TURN server: give it a username and credential "
                "(ice_username / ice_credential, or in its JSON entry)"
            )
