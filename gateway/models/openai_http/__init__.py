"""Engines behind an OpenAI-compatible HTTP server (``llm.py``: Chat Completions)."""
