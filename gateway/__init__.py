"""voice-gateway: a WebRTC voice gateway (VAD -> STT -> LLM -> TTS per caller).

Layers, top to bottom: ``server`` (HTTP) -> ``transports`` (the door; WebRTC, WebSocket and SIP
legs) -> ``realtime`` (the OpenAI Realtime protocol, with no sockets) -> ``pool`` (units, lifecycle)
-> ``pipeline`` (stage threads) -> ``models`` / ``media``.
"""

__version__ = "0.1.0"
