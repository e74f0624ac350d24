"""Kokoro-82M speech synthesis (``tts_backend`` ``kokoro`` on torch, ``kokoro_onnx`` on ONNX Runtime)."""
