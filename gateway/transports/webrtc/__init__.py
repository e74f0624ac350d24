"""The WebRTC transport: ``call`` (one RTCPeerConnection per caller, the leg of a door session:
SDP answer, ``oai-events`` data channel, the media track in and out, ICE/connect/media watchdogs)."""
