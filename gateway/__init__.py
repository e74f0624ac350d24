"""voice-gateway: a WebRTC voice gateway (VAD -> STT -> LLM -> TTS per caller).

Layers, top to bottom: ``server`` (HTTP) -> ``signaling`` (SDP, peer connections) -> ``pool``
(units, lifecycle) -> ``pipeline`` (stage threads) -> ``models`` / ``media``. ``realtime`` is the
OpenAI Realtime protocol, with no sockets.
"""

__version__ = "0.1.0"
