"""The WebSocket transports: ``event_socket`` (a WebSocket of JSON events), ``session`` (the leg of
a door session over ``GET /v1/realtime``: audio in and out as events) and ``sideband``
(``?call_id=`` control of a live call whose media is elsewhere)."""
