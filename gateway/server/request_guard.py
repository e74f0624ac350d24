"""Who may send a request, checked before any handler runs (so before a key is taken, a unit
claimed or a session opened): the web page it comes from (``Origin``) and the name it was sent to
(``Host``). One middleware, :func:`request_guard`; refusals are JSON in the OpenAI error shape.

- **Origin** (RFC 6454; the Fetch standard): a browser names the page's origin in ``Origin`` on
  every WebSocket upgrade and every request other than GET and HEAD. Such a request (a WebSocket
  upgrade, POST, DELETE...) whose ``Origin`` is present but neither listed in ``allowed_origins``
  (``*``: any) nor the gateway's own origin gets 403 ``origin_not_allowed``. CORS alone does not
  stop these: a WebSocket is not subject to CORS, and a form POST is a CORS "simple" request that
  the browser sends without a preflight (the page only cannot read the answer). The gateway's own
  origin is the request's scheme (``X-Forwarded-Proto`` from a proxy in front, else the
  connection's) with its ``Host`` (a missing port: the scheme's default), so the demo page at
  ``/`` works from the gateway itself and behind nginx. ``Origin: null`` (a sandboxed or local
  page) is foreign unless ``*`` is listed. A request without ``Origin`` (SDKs, curl, a backend, a
  SIP bridge's controller) is not a browser's and passes.
- **Host** (DNS rebinding): a page on a name its owner re-points at 127.0.0.1 is same-origin with
  itself, so its requests pass the Origin check; they carry that name in ``Host``. When the gateway
  listens on a loopback address, or ``allowed_hosts`` is set, a ``Host`` that is neither a loopback
  name (``localhost``, ``127.x.y.z``, ``[::1]``, any port) nor in ``allowed_hosts`` (``*``: any)
  gets 403 ``host_not_allowed``, whatever the method. ``/healthz`` answers any Host (load balancers
  and probes name the address). A gateway listening on another address with no ``allowed_hosts``
  does not check Host.

Both refusals are 403 (the request is understood and refused for who sent it; 421 Misdirected
Request would invite a browser to retry it on another connection).
"""

from __future__ import annotations

import ipaddress
from typing import Optional
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.typedefs import Handler

from gateway.server.app_keys import CONFIG
from gateway.server.errors import ApiError

# Methods a browser sends cross-origin without a preflight that change nothing here (a WebSocket
# upgrade is a GET, checked apart).
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
DEFAULT_PORTS = {"http": 80, "https": 443}
OPEN_PATHS = frozenset({"/healthz"})  # answered whatever the Host

Origin = tuple[str, str, Optional[int]]  # (scheme, host name, port)


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` (a host name or IP address, without a port; IPv6 with or without
    brackets; a trailing dot allowed) is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    name = name.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def split_authority(authority: str) -> tuple[str, Optional[int]]:
    """``host[:port]`` (a ``Host`` header, RFC 9110 section 7.2; IPv6 in brackets) -> (the name in
    lower case, without brackets or a trailing dot; the port or None). A bare IPv6 address (an
    ``allowed_hosts`` entry) is a name without a port. Raises ValueError for a port that is not a
    number or text after the closing bracket."""
    text = authority.strip().lower()
    port_text = ""
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"not a host[:port]: {authority[:60]!r}")
        port_text = rest[1:]
    elif text.count(":") == 1:
        name, _, port_text = text.partition(":")
    else:
        name = text
    if port_text and not (port_text.isascii() and port_text.isdigit()):
        raise ValueError(f"not a port: {port_text[:20]!r}")
    return name.rstrip("."), int(port_text) if port_text else None


def origin_listed(origins: list[str], origin: str) -> bool:
    """Whether ``origin`` (an ``Origin`` header) is one of ``origins`` (``GatewayConfig.origins``:
    lower case, no trailing ``/``) or ``origins`` holds ``*``."""
    return "*" in origins or origin.strip().rstrip("/").lower() in origins


def _parsed_origin(origin: str) -> Optional[Origin]:
    """``scheme://host[:port]`` -> (scheme, host, port: the scheme's default if none); None for
    ``null``, another scheme or text that is no origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.rstrip("."), port or DEFAULT_PORTS[scheme]


def own_origin(request: web.Request) -> Optional[Origin]:
    """The origin the request was sent to: ``X-Forwarded-Proto`` (its first value, ``http`` or
    ``https``; a browser cannot set it on a cross-origin request without a preflight) or the
    connection's scheme, and the ``Host`` header (a missing port: the scheme's default); None when
    ``Host`` is unusable."""
    forwarded = request.headers.get("X-Forwarded-Proto", "").split(",")[0].strip().lower()
    scheme = forwarded if forwarded in DEFAULT_PORTS else request.scheme
    try:
        name, port = split_authority(request.host)
    except ValueError:
        return None
    return scheme, name, port or DEFAULT_PORTS.get(scheme)


def refuse_foreign_origin(request: web.Request) -> None:
    """Raises ApiError 403 ``origin_not_allowed`` for a WebSocket upgrade or a state-changing
    request from a browser page whose origin may not use the gateway (see the module docstring)."""
    origin = request.headers.get("Origin")
    if origin is None:
        return
    upgrade = request.headers.get("Upgrade", "").strip().lower() == "websocket"
    if request.method in SAFE_METHODS and not upgrade:
        return
    if origin_listed(request.app[CONFIG].origins, origin):
        return
    parsed = _parsed_origin(origin)
    if parsed is not None and parsed == own_origin(request):
        return
    raise ApiError(
        403,
        f"Requests from the web page at {origin[:100]!r} are refused: the gateway's operator lists the "
        "origins that may call it in --allowed-origins (VG_ALLOWED_ORIGINS).",
        "origin_not_allowed",
    )


def refuse_foreign_host(request: web.Request) -> None:
    """Raises ApiError 403 ``host_not_allowed`` when the Host check is on (the gateway listens on
    loopback, or ``allowed_hosts`` is set) and ``Host`` names neither a loopback name nor an entry
    of ``allowed_hosts``; nothing for :data:`OPEN_PATHS`."""
    config = request.app[CONFIG]
    entries = config.hosts
    if "*" in entries or request.path in OPEN_PATHS or not (entries or is_loopback_name(config.host)):
        return
    try:
        name: Optional[str] = split_authority(request.host)[0]
    except ValueError:
        name = None
    if name is not None and (is_loopback_name(name) or name in _names(entries)):
        return
    raise ApiError(
        403,
        f"This gateway does not answer to the host name {request.host[:100]!r} (a guard against DNS "
        "rebinding): its operator lists the names it serves in --allowed-hosts (VG_ALLOWED_HOSTS).",
        "host_not_allowed",
    )


def _names(entries: list[str]) -> set[str]:
    """The host names of ``allowed_hosts`` entries (a port is ignored; unusable entries dropped)."""
    names = set()
    for entry in entries:
        try:
            names.add(split_authority(entry)[0])
        except ValueError:
            continue
    return names


@web.middleware
async def request_guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse a request for its ``Host`` (:func:`refuse_foreign_host`), then for its ``Origin``
    (:func:`refuse_foreign_origin`), before ``handler`` runs. Inside the error middleware, which
    renders the ApiError."""
    refuse_foreign_host(request)
    refuse_foreign_origin(request)
    return await handler(request)
