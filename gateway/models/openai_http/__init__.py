"""Engines behind OpenAI-compatible HTTP servers: the LLM (``llm.py``, Chat Completions), STT
(``stt.py``, ``POST /v1/audio/transcriptions``), TTS (``tts.py``, ``POST /v1/audio/speech``) and the
client side they share (``client.py``)."""
