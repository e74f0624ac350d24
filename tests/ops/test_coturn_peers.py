"""The TURN relay of docker-compose.yml is no way into the compose network: Debian's coturn, run on
loopback with the peer rules of the compose file's coturn command, lets a TURN client (aioice, as
aiortc uses it) bind a channel to a caller on the internet and to the gateways' fixed media
addresses, and refuses (403 Forbidden) every private, loopback, link-local and shared range, where
the LLM server and nginx live. Without those rules coturn relays to private addresses."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator

import yaml
from aioice import stun
from aioice.turn import TurnClientUdpProtocol

from tests.ops.services import ROOT, TURN_PASSWORD, TURN_USER, start_coturn, wait_for_log

PEER_FLAGS = ("--allowed-peer-ip=", "--denied-peer-ip=", "--no-multicast-peers", "--no-tcp-relay")


def compose_coturn_command() -> list[str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return compose["services"]["coturn"]["command"]


def gateway_media_addresses() -> list[str]:
    """The fixed addresses of the gateway services in the compose network."""
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return [
        spec["networks"]["default"]["ipv4_address"]
        for spec in services.values()
        if spec.get("environment", {}).get("VG_INSTANCE_ID")
    ]


@contextlib.asynccontextmanager
async def turn_client(port: int) -> AsyncIterator[TurnClientUdpProtocol]:
    """An allocation on the coturn at 127.0.0.1:``port`` (UDP, the test user); yields aioice's
    TURN client, the allocation deleted after."""
    server = ("127.0.0.1", port)
    transport, client = await asyncio.get_running_loop().create_datagram_endpoint(
        lambda: TurnClientUdpProtocol(
            server, username=TURN_USER, password=TURN_PASSWORD, lifetime=600, channel_refresh_time=500
        ),
        remote_addr=server,
    )
    try:
        await client.connect()
        yield client
        await client.delete()
    finally:
        transport.close()


async def bind_status(client: TurnClientUdpProtocol, channel: int, address: str) -> int:
    """200 when coturn binds a channel to ``address``:9 (a permission for that peer), else the
    TURN error code (403: the peer is forbidden)."""
    try:
        await client.channel_bind(channel, (address, 9))
    except stun.TransactionFailed as failed:
        return failed.response.attributes["ERROR-CODE"][0]
    return 200


async def test_the_compose_relay_reaches_callers_and_the_gateways_only(tmp_path):
    command = compose_coturn_command()
    rules = [flag for flag in command if flag.startswith(PEER_FLAGS)]
    assert "--no-tcp-relay" in rules and any(flag.startswith("--denied-peer-ip=") for flag in rules), command
    gateways = gateway_media_addresses()
    assert len(gateways) >= 2 and all(ipaddress.ip_address(a).is_private for a in gateways), gateways

    coturn, port = start_coturn(tmp_path, peer_rules=rules)
    try:
        assert await wait_for_log(coturn, "UDP listener opened on"), coturn.log
        async with turn_client(port) as client:
            allowed = ["203.0.113.7", "8.8.8.8", *gateways]  # callers on the internet, the gateways' media
            denied = [
                "10.1.2.3",
                "172.28.0.2",  # another service of the compose network (llm-server, nginx)
                "172.17.0.1",  # the Docker host's bridge
                "192.168.1.1",
                "127.0.0.1",
                "169.254.169.254",  # a cloud metadata service
                "100.64.0.1",
                "0.0.0.0",
                "224.0.0.1",
            ]
            statuses = {}
            for channel, address in enumerate(allowed + denied, start=0x4000):
                statuses[address] = await bind_status(client, channel, address)
        assert {address: statuses[address] for address in allowed} == dict.fromkeys(allowed, 200), coturn.log[-3000:]
        assert {address: statuses[address] for address in denied} == dict.fromkeys(denied, 403), coturn.log[-3000:]
    finally:
        coturn.stop()


async def test_without_the_rules_coturn_relays_into_private_networks(tmp_path):
    """What the rules are for: coturn's defaults (loopback peers aside) let a caller with the TURN
    password reach any private address."""
    coturn, port = start_coturn(tmp_path, peer_rules=[])
    try:
        assert await wait_for_log(coturn, "UDP listener opened on"), coturn.log
        async with turn_client(port) as client:
            assert await bind_status(client, 0x4000, "172.28.0.2") == 200
            assert await bind_status(client, 0x4001, "10.1.2.3") == 200
    finally:
        coturn.stop()
