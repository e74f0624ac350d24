"""HTTP only: the aiohttp app and its routes, no audio here.

``app`` (the app factory, start-up and clean-up), ``app_keys`` (the app state), ``routes`` (the
handlers), ``admission`` (who may open a call, and opening it), ``offers`` (reading an SDP offer
and its session config out of a request), ``auth`` (API key and ephemeral keys), ``errors``
(``ApiError``), ``middleware`` (CORS, errors as JSON), ``static_files`` (the demo page),
``runner`` (serving inside a running event loop), ``ops_routes`` (``/healthz``, ``/metrics``,
``/v1/pool``, ``/v1/usage``), ``shutdown`` (the draining flag and the graceful drain),
``serving`` (the ``serve`` process: signals, drain, exit), ``websocket_routes`` (``GET
/v1/realtime``: the WebSocket transport and the sideband, up to the upgrade).
"""
