"""SIP over TLS (RFC 3261 26.2, ``--sip-tls-cert/--sip-tls-key``): a real phone (Debian's baresip)
calls the gateway's TLS port with SDES-SRTP media (what a TLS call gets by default: ``sip_srtp``),
is answered, its key presses are seen, and the gateway's BYE reaches it on the connection its
INVITE came on; the TLS port takes no plain SIP; a certificate without its key, or one that
cannot be read, stops the start with a clear error."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import ssl
from pathlib import Path

import aiohttp
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gateway.config import GatewayConfig
from gateway.server.app_keys import SIP
from gateway.server.runner import free_port
from gateway.transports.sip.transport import SipTransport, server_tls_context
from tests.helpers import app_idle, serve, wait_until
from tests.transports.sip.baresip_phone import BaresipPhone
from tests.transports.sip.conftest import sip_config
from tests.transports.websocket.ws_client import EventClient


def self_signed(folder: Path, dns_name: str = "") -> tuple[Path, Path]:
    """A self-signed ECDSA P-256 certificate for 127.0.0.1 (or, given ``dns_name``, for that host
    name only) and its key (PEM files in ``folder``)."""
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = (
        [x509.DNSName(dns_name)] if dns_name else [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "voice-gateway test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    cert_file, key_file = folder / "sip-cert.pem", folder / "sip-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


async def test_baresip_calls_over_tls_and_hears_the_gateways_bye(models, speech_8k, gateway_config, tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="gateway.transports.sip.call")
    cert_file, key_file = self_signed(tmp_path / "tls")
    tls_port = free_port()
    config = sip_config(gateway_config, sip_tls_cert=str(cert_file), sip_tls_key=str(key_file), sip_tls_port=tls_port)
    microphone = np.concatenate([np.zeros(8000, np.int16), speech_8k("Hello."), np.zeros(8000 * 30, np.int16)])
    async with (
        serve(config, models) as (url, app),
        BaresipPhone(tmp_path / "phone", microphone, transport="tls", cafile=cert_file, mediaenc="srtp-mand") as phone,
    ):
        assert app[SIP].transport.tls_port == tls_port
        assert (await phone.command("dial", f"sip:agent@127.0.0.1:{tls_port};transport=tls"))["ok"]
        await phone.event("CALL_ESTABLISHED")  # no webhook: accepted with the default session
        call_id = next(iter(app[SIP].calls))
        call = app[SIP].calls[call_id]
        assert call.dialog.transport == "TLS" and call.transaction.peer.transport == "TLS"
        assert call.dialog.contact.endswith(f":{tls_port};transport=tls>"), call.dialog.contact
        assert call.rtp.srtp is not None and " RTP/SAVP " in call.answer_sdp
        async with EventClient(url, query=f"?call_id={call_id}") as control:
            assert (await phone.command("sndcode", "5"))["ok"]
            pressed = await control.wait_for("input_audio_buffer.dtmf_event_received", timeout=10)
            assert pressed["event"] == "5"
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{url}/v1/realtime/calls/{call_id}/hangup") as hung:
                assert hung.status == 200
        await phone.event("CALL_CLOSED", within=15)  # (baresip says "Connection reset by peer" for a BYE)
        assert await wait_until(lambda: any("BYE answered 200" in r.getMessage() for r in caplog.records), 10)
        assert await wait_until(lambda: call_id not in app[SIP].calls, 10)
        assert await wait_until(lambda: app_idle(app), 15)


async def test_the_tls_port_takes_no_plain_sip_and_the_gateway_goes_on(models, gateway_config, tmp_path, caplog):
    cert_file, key_file = self_signed(tmp_path / "tls")
    tls = {"sip_tls_cert": str(cert_file), "sip_tls_key": str(key_file), "sip_tls_port": free_port()}
    config = sip_config(gateway_config, **tls)
    async with serve(config, models) as (_url, app):
        sip = app[SIP]
        options = (
            b"OPTIONS sip:agent@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.1:9;branch=z9hG4bK1\r\n"
            b"From: <sip:a@127.0.0.1>;tag=1\r\nTo: <sip:agent@127.0.0.1>\r\nCall-ID: plain-on-tls\r\n"
            b"CSeq: 1 OPTIONS\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n"
        )
        reader, writer = await asyncio.open_connection("127.0.0.1", sip.transport.tls_port)
        writer.write(options)
        answer = await asyncio.wait_for(reader.read(4096), 10)  # the handshake fails: closed, no SIP answer
        assert b"SIP/2.0" not in answer
        writer.close()
        assert sip.transport.received == 0
        reader, writer = await asyncio.open_connection("127.0.0.1", sip.port)  # plain TCP still answers
        writer.write(options.replace(b"plain-on-tls", b"plain-on-tcp"))
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)).startswith(b"SIP/2.0 200")
        writer.close()
        client = ssl.create_default_context(cafile=str(cert_file))
        reader, writer = await asyncio.open_connection("127.0.0.1", sip.transport.tls_port, ssl=client)
        writer.write(options.replace(b"plain-on-tls", b"over-tls").replace(b"SIP/2.0/TCP", b"SIP/2.0/TLS"))
        assert (await asyncio.wait_for(reader.readuntil(b"\r\n"), 10)).startswith(b"SIP/2.0 200")
        writer.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "no warning, no traceback"


async def test_a_new_tls_connection_checks_the_host_name_it_was_asked_for(tmp_path):
    """A BYE or REFER to a next hop named by host name (a proxy's Record-Route, a ``sips:`` Contact)
    verifies the certificate for that name, not for the address it resolved to."""
    cert_file, key_file = self_signed(tmp_path, dns_name="localhost")
    received: list[bytes] = []

    async def serve_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"\r\n\r\n"))
        writer.close()

    server = await asyncio.start_server(
        serve_once, "127.0.0.1", 0, ssl=server_tls_context(str(cert_file), str(key_file))
    )
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cafile=str(cert_file))
    transport = SipTransport("127.0.0.1", 0, lambda message, peer: None, client_tls=client)
    await transport.start()
    try:
        with pytest.raises(ssl.SSLCertVerificationError):  # the certificate names localhost, not 127.0.0.1
            await transport.connect("TLS", ("127.0.0.1", port))
        peer = await transport.connect("TLS", ("127.0.0.1", port), server_hostname="localhost")
        peer.send(b"OPTIONS sip:x@localhost SIP/2.0\r\nContent-Length: 0\r\n\r\n")
        assert await wait_until(lambda: bool(received), 10)
        assert received[0].startswith(b"OPTIONS")
    finally:
        await transport.close()
        server.close()


def test_tls_settings_are_checked(tmp_path):
    cert_file, key_file = self_signed(tmp_path)
    tls = {"sip_tls_cert": str(cert_file), "sip_tls_key": str(key_file)}
    with pytest.raises(ValueError, match="both sip_tls_cert and sip_tls_key"):
        GatewayConfig(sip_port=5060, sip_tls_cert=str(cert_file))
    with pytest.raises(ValueError, match="needs sip_port"):
        GatewayConfig(**tls)  # SIP is off: TLS would silently not start
    with pytest.raises(ValueError, match="sip_tls_port 5060"):
        GatewayConfig(sip_port=5060, sip_tls_port=5060, **tls)
    with pytest.raises(ValueError, match="sip_tls_port 65536"):
        GatewayConfig(sip_port=65535, **tls)
    with pytest.raises(ValueError, match="no such file"):
        GatewayConfig(sip_port=5060, sip_tls_cert=str(tmp_path / "missing.pem"), sip_tls_key=str(key_file))
    assert GatewayConfig(sip_port=5060, **tls).sip_tls_cert == str(cert_file)
    with pytest.raises(ValueError, match=r"missing\.pem"):
        server_tls_context(str(tmp_path / "missing.pem"), str(key_file))
    with pytest.raises(ValueError, match=r"sip-key\.pem"):
        server_tls_context(str(key_file), str(key_file))  # a key is no certificate
    assert server_tls_context(str(cert_file), str(key_file)) is not None


async def test_the_start_up_reads_the_tls_certificate_once(models, gateway_config, tmp_path, monkeypatch):
    """``serve`` read the SIP TLS certificate and key three times: in ``startup_settings`` before
    the models loaded, again when ``create_app`` read the start-up settings, and once more when
    the SIP user agent started (a key asking for a passphrase would have asked three times). Now
    once: read before loading and handed to the app, whose user agent listens with it."""
    from aiohttp import web

    from gateway.server.app import create_app, startup_settings
    from gateway.transports.sip import settings as sip_settings

    cert_file, key_file = self_signed(tmp_path / "tls")
    tls_port = free_port()
    config = sip_config(gateway_config, sip_tls_cert=str(cert_file), sip_tls_key=str(key_file), sip_tls_port=tls_port)
    reads: list[str] = []

    def counted(cert: str, key: str) -> ssl.SSLContext:
        reads.append(cert)
        return server_tls_context(cert, key)

    monkeypatch.setattr(sip_settings, "server_tls_context", counted)
    startup = startup_settings(config)  # what `serve` does before the models load
    runner = web.AppRunner(create_app(config, models=models, startup=startup))
    await runner.setup()  # the SIP user agent starts, with TLS
    try:
        assert runner.app[SIP].transport.tls_port == tls_port
        assert reads == [str(cert_file)]
    finally:
        await runner.cleanup()
