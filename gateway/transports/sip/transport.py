"""SIP over UDP, TCP and TLS (RFC 3261 sections 18 and 26.2) on asyncio: one UDP socket and one TCP
listener on the same port, and with a server certificate a TLS listener on a port of its own
(5061 beside 5060); messages framed (a datagram each; on TCP and TLS by ``Content-Length``, 18.3)
and parsed, responses sent back where the request came from (the source address and port, as RFC
3581's ``rport`` asks: right behind NAT and for a proxy alike).

A malformed message never reaches the dialogs: a request whose Via, From, To, Call-ID and CSeq
could be read is answered ``400 Bad Request``, anything else is dropped and counted. A TCP
connection that sends something that cannot be framed (no blank line within
``MAX_MESSAGE_BYTES``, a bad ``Content-Length``) is closed.

TCP limits: at most ``max_connections`` accepted connections at once, and at most
``max_connections_per_source`` from one IP address, so one host cannot hold them all and shut the
trunk out (one beyond either cap is closed at once; the first refusal is logged); a body must
follow its head within ``body_timeout_s`` (a peer that sends a head with ``Content-Length`` and
never the body is closed); a connection made to send a request gives up after
``connect_timeout_s``, and is forgotten once it closes (never written to again). A connection a
live call is reached on (:meth:`SipTransport.pin`) is never closed for being idle. Closing the
transport ends every connection's reader quietly. TLS: an accepted connection must finish its
handshake within ``TLS_HANDSHAKE_S`` and counts towards the caps once it has (asyncio's TLS server
hands it over only then: handshakes in progress are bounded by time, not by count); a connection
the gateway opens verifies the peer's certificate, for the host name it was asked to reach,
against the system's CAs (``client_tls``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import ssl
from collections.abc import Callable
from typing import Optional, cast

from gateway.transports.sip.message import (
    MAX_MESSAGE_BYTES,
    SipParseError,
    SipRequest,
    SipResponse,
    make_response,
    parse_message,
)

log = logging.getLogger(__name__)

MessageHandler = Callable[["SipRequest | SipResponse", "SipPeer"], None]
# Seconds a TCP connection may stay silent before it is closed (keeps no dead sockets).
TCP_IDLE_S = 600.0
# Accepted TCP connections at once (a trunk or proxy holds a few; beyond: closed on accept).
MAX_TCP_CONNECTIONS = 256
# Accepted TCP connections from one IP address at once (a trunk, a proxy or a NAT of a few phones).
MAX_TCP_CONNECTIONS_PER_SOURCE = 32
# Seconds a message body may take after its head (64*T1, RFC 3261 Timer F's span).
TCP_BODY_S = 32.0
# Seconds an outgoing TCP connect may take (a request then fails like one unanswered).
TCP_CONNECT_S = 10.0
# Seconds a TLS handshake may take (a peer that connects and says nothing is closed).
TLS_HANDSHAKE_S = 10.0


def server_tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The TLS server context of SIP over TLS: the certificate chain and key (PEM files); no client
    certificate asked for. Raises ValueError naming the file when they cannot be loaded."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"SIP TLS certificate {cert_file!r} / key {key_file!r}: {exc}") from None
    return context


class SipPeer:
    """The other end of one message: ``transport`` "UDP", "TCP" or "TLS", ``address`` (host, port)."""

    def __init__(self, transport: str, address: tuple[str, int], write: Callable[[bytes], None]) -> None:
        self.transport = transport
        self.address = address
        self._write = write

    @property
    def reliable(self) -> bool:
        """TCP and TLS: no retransmissions (RFC 3261 17)."""
        return self.transport != "UDP"

    def send(self, data: bytes) -> None:
        """Send one encoded message; a failure is logged and dropped."""
        try:
            self._write(data)
        except Exception as exc:  # a closed connection, an unreachable address
            log.info("SIP send to %s:%d failed: %s", *self.address, exc)


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, owner: SipTransport) -> None:
        self.owner = owner
        self.transport: Optional[asyncio.DatagramTransport] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        transport = self.transport
        if transport is None:
            return
        peer = SipPeer("UDP", (addr[0], addr[1]), lambda out: transport.sendto(out, addr))
        self.owner.deliver(data, peer)

    def error_received(self, exc: Exception) -> None:  # ICMP port unreachable and the like
        log.debug("SIP UDP error: %s", exc)


class SipTransport:
    """The SIP sockets of the gateway: :meth:`start` binds UDP and TCP on (``host``, ``port``)
    (port 0: an ephemeral one, the same for both), and with ``tls`` (a server context,
    :func:`server_tls_context`) TLS on ``tls_port`` (0: ``port`` + 1, or an ephemeral one when
    ``port`` is 0); each valid message goes to ``on_message``. ``received`` counts the messages
    read, ``malformed`` those refused, ``answered_400`` those of them answered."""

    def __init__(
        self,
        host: str,
        port: int,
        on_message: MessageHandler,
        tls: Optional[ssl.SSLContext] = None,
        tls_port: int = 0,
        client_tls: Optional[ssl.SSLContext] = None,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.tls_port = tls_port or (port + 1 if port else 0)
        self._client_tls = client_tls  # made at the first outgoing TLS connection when None
        self.on_message = on_message
        self.received = 0
        self.malformed = 0
        self.answered_400 = 0
        self._udp: Optional[_Datagrams] = None
        self._server: Optional[asyncio.Server] = None
        self._tls_server: Optional[asyncio.Server] = None
        self.max_connections = MAX_TCP_CONNECTIONS
        self.max_connections_per_source = MAX_TCP_CONNECTIONS_PER_SOURCE
        self.body_timeout_s = TCP_BODY_S
        self.connect_timeout_s = TCP_CONNECT_S
        self.refused_connections = 0  # accepted TCP connections closed over either cap
        self._connections: dict[tuple[str, tuple[str, int]], asyncio.StreamWriter] = {}  # (transport, address)
        self._accepted = 0
        self._accepted_from: dict[str, int] = {}  # source IP -> accepted connections open
        self._pins: dict[tuple[str, tuple[str, int]], int] = {}  # connection -> live calls reached on it
        self._readers: set[asyncio.Task[None]] = set()
        self._closing = False

    async def start(self) -> None:
        """Bind the TCP listener, then UDP on its port, then TLS (when set). Raises OSError when a
        port is taken."""
        self._server = await asyncio.start_server(functools.partial(self._serve_stream, "TCP"), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_datagram_endpoint(lambda: _Datagrams(self), local_addr=(self.host, self.port))
        self._udp = protocol
        if self.tls is not None:
            try:
                serve = functools.partial(self._serve_stream, "TLS")
                self._tls_server = await asyncio.start_server(
                    serve, self.host, self.tls_port, ssl=self.tls, ssl_handshake_timeout=TLS_HANDSHAKE_S
                )
            except OSError:
                await self.close()
                raise
            self.tls_port = self._tls_server.sockets[0].getsockname()[1]

    def deliver(self, data: bytes, peer: SipPeer) -> None:
        """Parse ``data`` from ``peer`` and hand it on (malformed: 400 or dropped, see the module)."""
        self.received += 1
        if not data.strip(b"\r\n"):
            return  # a keep-alive (RFC 5626 3.5.1)
        try:
            message = parse_message(data)
        except SipParseError as exc:
            self.malformed += 1
            log.info("malformed SIP from %s:%d: %s", *peer.address, exc)
            if exc.request is not None and exc.request.method != "ACK":
                self.answered_400 += 1
                peer.send(make_response(exc.request, 400, reason="Bad Request").encode())
            return
        try:
            self.on_message(message, peer)
        except Exception:  # a fault in the core must not take the socket down (its transaction answered 500)
            log.exception("SIP message from %s:%d not handled", *peer.address)

    # ----- TCP and TLS -----
    async def _serve_stream(self, transport: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        name = writer.get_extra_info("peername")
        address = (str(name[0]), int(name[1]))
        source = address[0]
        held = self._accepted_from.get(source, 0)
        if self._closing or self._accepted >= self.max_connections or held >= self.max_connections_per_source:
            self.refused_connections += 1
            if self.refused_connections == 1:
                log.warning(
                    "SIP over TCP and TLS: %d connections open (%d from %s), closing new ones",
                    self._accepted,
                    held,
                    source,
                )
            writer.close()
            return
        task = asyncio.current_task()
        if task is not None:
            self._readers.add(task)
        self._accepted += 1
        self._accepted_from[source] = held + 1
        try:
            await self._hold(reader, writer, transport, address)
        finally:
            self._accepted -= 1
            left = self._accepted_from.get(source, 1) - 1
            if left > 0:
                self._accepted_from[source] = left
            else:
                self._accepted_from.pop(source, None)
            if task is not None:
                self._readers.discard(task)

    def pin(self, transport: str, address: tuple[str, int]) -> None:
        """A live call is reached on the ``transport`` connection from ``address``: keep it open
        however long it is quiet (until :meth:`unpin`). Nothing for UDP."""
        if transport != "UDP":
            key = (transport, address)
            self._pins[key] = self._pins.get(key, 0) + 1

    def unpin(self, transport: str, address: tuple[str, int]) -> None:
        """The call :meth:`pin` was for has ended."""
        key = (transport, address)
        if key in self._pins:
            self._pins[key] -= 1
            if self._pins[key] <= 0:
                del self._pins[key]

    async def _hold(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, transport: str, address: tuple[str, int]
    ) -> None:
        """Read ``writer``'s connection until it ends, then close it and forget it (a cancel by
        :meth:`close` ends it quietly: asyncio would log a cancelled connection callback)."""
        key = (transport, address)
        self._connections[key] = writer
        try:
            await self._read_stream(reader, SipPeer(transport, address, writer.write))
        except asyncio.CancelledError:
            pass  # the transport closes (only close() cancels these tasks)
        finally:
            if self._connections.get(key) is writer:
                del self._connections[key]
            writer.close()

    async def _read_stream(self, reader: asyncio.StreamReader, peer: SipPeer) -> None:
        key = (peer.transport, peer.address)
        while True:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TCP_IDLE_S)
            except TimeoutError:
                if key in self._pins:
                    continue  # quiet, but a live call is reached on it
                return
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
                return  # (OSError: a reset connection, a TLS record that does not decrypt)
            head = head.lstrip(b"\r\n")
            if not head:
                continue  # CRLF keep-alives
            length = _content_length(head)
            if length is None or len(head) + length > MAX_MESSAGE_BYTES:
                self.malformed += 1
                log.info("SIP over %s from %s:%d cannot be framed: closing", peer.transport, *peer.address)
                return
            try:
                body = await asyncio.wait_for(reader.readexactly(length), self.body_timeout_s)
            except TimeoutError:
                self.malformed += 1
                log.info(
                    "SIP over %s from %s:%d: no body within %g s: closing",
                    peer.transport,
                    *peer.address,
                    self.body_timeout_s,
                )
                return
            except (asyncio.IncompleteReadError, OSError):
                return
            self.deliver(head + body, peer)

    async def connect(self, transport: str, address: tuple[str, int], server_hostname: Optional[str] = None) -> SipPeer:
        """A peer to send requests to ``address`` (an IP address): over UDP from the listening
        socket; over TCP or TLS on the open connection from that address, else a new one (read like
        an accepted one). A new TLS connection verifies the peer's certificate for
        ``server_hostname`` (the host name the address was resolved from; default: the address)
        against ``client_tls``. Raises OSError when a connection cannot be made (an ssl.SSLError
        for a certificate refused)."""
        if transport == "UDP":
            udp = self._udp
            if udp is None or udp.transport is None:
                raise OSError("SIP UDP socket is closed")
            datagrams = udp.transport
            return SipPeer("UDP", address, lambda out: datagrams.sendto(out, address))
        key = (transport, address)
        existing = self._connections.get(key)
        if existing is not None and not existing.is_closing():
            return SipPeer(transport, address, existing.write)
        if self._closing:
            raise OSError("SIP transport is closed")
        tls, hostname = None, None
        if transport == "TLS":
            if self._client_tls is None:
                self._client_tls = ssl.create_default_context()
            tls, hostname = self._client_tls, server_hostname or address[0]
        try:
            opening = asyncio.open_connection(*address, ssl=tls, server_hostname=hostname)
            reader, writer = await asyncio.wait_for(opening, self.connect_timeout_s)
        except TimeoutError:
            raise OSError(
                f"SIP over {transport}: no connection to {address[0]}:{address[1]} in {self.connect_timeout_s:g} s"
            ) from None
        if self._closing:  # closed while connecting: this connection would outlive the transport
            writer.close()
            raise OSError("SIP transport is closed")
        self._connections[key] = writer  # (now: a second request reuses it)
        task = asyncio.ensure_future(self._hold(reader, writer, transport, address))
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)
        return SipPeer(transport, address, writer.write)

    def connection(self, transport: str, address: tuple[str, int]) -> Optional[SipPeer]:
        """A peer on the open ``transport`` connection from or to ``address``, None when there is none."""
        writer = self._connections.get((transport, address))
        if writer is None or writer.is_closing():
            return None
        return SipPeer(transport, address, writer.write)

    @property
    def open_connections(self) -> int:
        """TCP connections open now (accepted and made)."""
        return len(self._connections)

    async def close(self) -> None:
        """Close the sockets and every TCP connection (their readers end at the closed stream; any
        still reading after a second are cancelled)."""
        self._closing = True
        if self._udp is not None and self._udp.transport is not None:
            self._udp.transport.close()
        for server in (self._server, self._tls_server):
            if server is not None:
                server.close()
        for writer in list(self._connections.values()):
            writer.close()
        if self._readers:
            await asyncio.wait(list(self._readers), timeout=1)
        for task in list(self._readers):
            task.cancel()
        if self._readers:
            await asyncio.wait(list(self._readers), timeout=2)
        self._connections.clear()
        for server in (self._server, self._tls_server):
            if server is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(server.wait_closed(), 2)


def _content_length(head: bytes) -> Optional[int]:
    """The Content-Length of a message head (required on TCP, RFC 3261 18.3), None when absent or
    malformed."""
    for line in head.split(b"\r\n"):
        name, colon, value = line.partition(b":")
        if colon and name.strip().lower() in (b"content-length", b"l"):
            text = value.strip()
            return int(text) if text.isdigit() else None  # bytes.isdigit: ASCII only
    return None
