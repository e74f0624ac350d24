"""The OpenAI Realtime protocol: client events in, server events out; no sockets and no audio."""
