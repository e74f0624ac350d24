"""Real SIP-to-WebRTC bridges and media relays in front of the gateway, as a PBX or trunk puts them:
Debian's Janus (SIP plugin, with ``scripts/janus_bridge.py``) before the WebRTC door, Debian's
rtpengine (userspace) with Kamailio before the SIP door; a baresip phone calls through them."""
