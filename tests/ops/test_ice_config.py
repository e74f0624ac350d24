"""ICE servers from the configuration: the RTCIceServer JSON shape and comma-separated URLs; no
default public STUN server; bad settings fail at start-up with a message naming ice_servers."""

from __future__ import annotations

import json

import pytest

from gateway.config import GatewayConfig
from gateway.transports.webrtc.ice import ice_configuration, ice_servers


def test_no_setting_means_no_server_at_all():
    # aiortc's own default (iceServers None) is Google's public STUN server: never used.
    assert ice_configuration(GatewayConfig()).iceServers == []


def test_rtc_ice_server_json_shape():
    setting = json.dumps(
        [
            {
                "urls": ["turn:turn.example.org:3478", "turn:turn.example.org:3478?transport=tcp"],
                "username": "u",
                "credential": "p",
            },
            {"urls": "stun:stun.example.org:3478"},
        ]
    )
    servers = ice_servers(GatewayConfig(ice_servers=setting))
    assert [s.urls for s in servers] == [
        ["turn:turn.example.org:3478", "turn:turn.example.org:3478?transport=tcp"],
        ["stun:stun.example.org:3478"],
    ]
    assert (servers[0].username, servers[0].credential) == ("u", "p")
    assert servers[1].username is None
    one = ice_servers(
        GatewayConfig(
            ice_servers='{"urls": "turns:t.example.org:5349?transport=tcp", "username": "a", "credential": "b"}'
        )
    )
    assert one[0].urls == ["turns:t.example.org:5349?transport=tcp"]


def test_comma_separated_urls_share_the_credentials():
    servers = ice_servers(
        GatewayConfig(
            ice_servers="stun:s.example.org:3478, turn:t.example.org:3478", ice_username="u", ice_credential="p"
        )
    )
    assert len(servers) == 1 and servers[0].urls == ["stun:s.example.org:3478", "turn:t.example.org:3478"]
    assert (servers[0].username, servers[0].credential) == ("u", "p")


@pytest.mark.parametrize(
    "setting",
    [
        "[]",
        "[1]",
        '[{"url": "stun:s.example.org"}]',
        '[{"urls": []}]',
        '[{"urls": ["turn:t.example.org:3478"]}]',  # TURN without credentials: aiortc would skip it
        '[{"urls": ["turn:t.example.org:3478"], "username": "u", "credential": 5}]',
        '[{"urls": ["http://example.org"]}]',
        "[{not json",
    ],
)
def test_bad_json_settings_name_ice_servers(setting):
    with pytest.raises(ValueError, match=r"^ice_servers"):
        ice_servers(GatewayConfig(ice_servers=setting))
