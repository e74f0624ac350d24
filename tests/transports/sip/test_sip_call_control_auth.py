"""With an API key configured every call-control route wants it (``--api-key``: all of
``/v1/realtime/*``): hang-up (DELETE and ``POST .../hangup``, any transport's call) and SIP's
accept, reject and refer. Without the key: 401; with it: past the check (404 for a call that is
not there). Real HTTP over loopback, one gateway for every route (the shared models). And the
``--instance-id`` help names the ids it prefixes."""

from __future__ import annotations

from dataclasses import fields

import aiohttp

from gateway.config import GatewayConfig
from gateway.server.runner import free_port
from gateway.transports.transport import TransportKind
from tests.helpers import serve

API_KEY = "sk-test-call-control"
ROUTES = [
    ("DELETE", "/v1/realtime/calls/sip_nosuchcall"),
    ("POST", "/v1/realtime/calls/sip_nosuchcall/hangup"),
    ("POST", "/v1/realtime/calls/sip_nosuchcall/accept"),
    ("POST", "/v1/realtime/calls/sip_nosuchcall/reject"),
    ("POST", "/v1/realtime/calls/sip_nosuchcall/refer"),
]


async def test_call_control_needs_the_api_key(models, gateway_config):
    config = gateway_config(api_key=API_KEY, sip_port=free_port(), sip_host="127.0.0.1")
    async with serve(config, models) as (url, _app), aiohttp.ClientSession() as http:
        for method, path in ROUTES:
            body = {"target_uri": "sip:desk@example.com"} if path.endswith("/refer") else {}
            for token in (None, "sk-wrong"):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with http.request(method, f"{url}{path}", json=body, headers=headers) as response:
                    assert response.status == 401, (path, token, await response.text())
                    assert (await response.json())["error"]["code"] == "invalid_api_key"
            keyed = {"Authorization": f"Bearer {API_KEY}"}
            async with http.request(method, f"{url}{path}", json=body, headers=keyed) as response:
                assert response.status == 404, (path, await response.text())
                assert (await response.json())["error"]["code"] == "call_not_found"


def test_the_instance_id_help_names_every_call_id_prefix():
    # --instance-id is the middle of every transport's ids (door.new_session_id), sip_... too
    help_text = next(f for f in fields(GatewayConfig) if f.name == "instance_id").metadata["help"]
    for kind in TransportKind:
        assert f"{kind.id_prefix}_" in help_text, (kind, help_text)
