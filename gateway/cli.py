"""``voice-gateway serve | prepare | models | loadtest ...`` (also ``python -m gateway ...``)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import socket
import sys
from typing import Optional

from gateway.config import GatewayConfig
from gateway.config_sources import DefaultsHelpFormatter, changed_settings, unknown_variables
from gateway.logging_setup import configure_logging


def build_parser() -> argparse.ArgumentParser:
    """The subcommands: ``serve``, ``prepare`` and ``models`` take every GatewayConfig setting as a
    flag; ``loadtest`` (simulated callers, ``gateway.loadgen``) its own, then ``--`` and the flags
    of the gateway it starts."""
    parser = argparse.ArgumentParser(prog="voice-gateway", description="WebRTC voice gateway")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway (HTTP signaling + WebRTC media)")
    GatewayConfig.add_arguments(serve)
    prepare = commands.add_parser("prepare", help="load (and convert, once) the configured models, then exit")
    GatewayConfig.add_arguments(prepare)
    models = commands.add_parser("models", help="list each stage's backends: installed, and which is selected")
    GatewayConfig.add_arguments(models)
    from gateway.loadgen.flags import build_parser as loadtest_flags

    loadtest = commands.add_parser(
        "loadtest",
        formatter_class=DefaultsHelpFormatter,
        help="call a gateway with N simulated callers (WebRTC or WebSocket, real recordings) and print turn "
        "latency per N",
    )
    loadtest_flags(loadtest)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``argv`` defaults to ``sys.argv[1:]``); returns the exit status.

    0 on success, 1 when model weights are missing or ``serve`` cannot listen on its port, 2 for a
    setting that does not parse or cannot be used (the message names it), a backend name no stage
    has (the choices are named; ``gateway.models.backends``) or ``serve`` off loopback without an
    API key (argparse itself exits with 2 on an unknown flag or a flag value of the wrong type).
    Once logging is set up it warns about each ``VG_*`` variable that is no setting (and goes on),
    and ``serve`` / ``prepare`` log the settings other than the defaults (:func:`log_changed_settings`).
    """
    from gateway.models.backends import check_backends

    args = build_parser().parse_args(argv)
    if args.command == "loadtest":
        from gateway.loadgen.run import main as loadtest

        return loadtest(args)
    try:
        config = GatewayConfig.from_args(args)
        check_backends(config)
    except ValueError as exc:
        print(f"voice-gateway: bad setting: {exc}", file=sys.stderr)
        return 2
    bound: Optional[socket.socket] = None
    if args.command == "serve" and config.port == 0:  # the port served names the instance, not 0
        from gateway.server.serving import CannotServe, bind_a_free_port

        try:
            bound = bind_a_free_port(config.host)
        except CannotServe as exc:
            print(f"voice-gateway: {exc}", file=sys.stderr)
            return exc.status
        config = dataclasses.replace(config, port=bound.getsockname()[1])
    configure_logging(
        config.log_level,
        config.log_format,
        instance=config.instance,
        secrets=(
            config.api_key,
            config.llm_api_key,
            config.stt_api_key,
            config.tts_api_key,
            config.ice_credential,
            config.sip_webhook_secret,
        ),
    )
    for unknown in unknown_variables(GatewayConfig, os.environ):  # a typo the operator believes applied
        logging.getLogger("gateway.config").warning(unknown)
    if args.command == "serve":
        try:
            return serve(config, bound)
        finally:
            if bound is not None:
                bound.close()
    if args.command == "prepare":
        return prepare(config)
    if args.command == "models":
        from gateway.models.backends import format_backends, list_backends

        print(format_backends(list_backends(config)))
        return 0
    return 2


def log_changed_settings(config: GatewayConfig) -> None:
    """Log (INFO) the settings other than the defaults in one line, before the models load: what an
    operator checks the ``VG_*`` variables and flags against (``changed_settings``: secrets as ``[set]``)."""
    changed = ", ".join(changed_settings(config)) or "none"
    logging.getLogger("gateway.config").info("settings other than the defaults: %s", changed)


def prepare(config: GatewayConfig) -> int:
    """Load the models once so the one-time work (joining Whisper, converting the GGUF) lands in
    ``model_cache_dir`` ahead of serving, e.g. while building an image. 0, or 1 if weights are missing."""
    from gateway.models.base import ModelNotFoundError
    from gateway.models.loader import prepare_models

    log_changed_settings(config)
    try:
        prepare_models(config)
    except ModelNotFoundError as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a setting an engine refuses
        print(f"voice-gateway: bad setting: {exc}", file=sys.stderr)
        return 2
    print(f"voice-gateway: models ready (cache {config.model_cache_dir})")
    return 0


def serve(config: GatewayConfig, bound: Optional[socket.socket] = None) -> int:
    """Load the models, then serve until SIGTERM/SIGINT and drain gracefully (blocks the calling
    thread; see :mod:`gateway.server.serving`: a second signal exits at once). ``bound``: the
    socket to serve on, bound to ``config.port`` (``--port 0``: the port the kernel chose).

    Models load before the port opens, so a listening gateway can take calls. Returns 2 without
    loading anything for a host other than loopback with no API key (unless ``allow_no_api_key``)
    or a setting refused before loading (``startup_settings``), 2 for one refused at start-up
    (an engine's or SIP's), 1 without serving if weights are missing or a port cannot be listened
    on (checked before the models load: ``check_can_listen``), else 0 after the drain.
    """
    from gateway.models.base import ModelNotFoundError
    from gateway.models.loader import load_models
    from gateway.server.app import create_app, startup_settings
    from gateway.server.request_guard import is_loopback_name
    from gateway.server.serving import CannotServe, check_can_listen, serve_until_signalled
    from gateway.transports.sources import SourceLimits

    if not (config.api_key or config.allow_no_api_key or is_loopback_name(config.host)):
        print(
            f"voice-gateway: not serving on {config.host or 'every address'} without an API key: anyone who "
            "reaches the port could open calls, hang them up and steer them. Set --api-key (VG_API_KEY), or "
            "--allow-no-api-key 1 (VG_ALLOW_NO_API_KEY=1) when something in front checks the callers.",
            file=sys.stderr,
        )
        return 2
    try:  # before minutes of model loading: the network lists, STUN/TURN, the warm session file
        SourceLimits.from_config(config)
        startup = startup_settings(config)
    except ValueError as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return 2
    try:  # before the models load: a wrong --host or a port in use is told at once
        check_can_listen(config, http=bound is None)
    except CannotServe as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return exc.status
    log_changed_settings(config)
    try:
        models = load_models(config)
    except ModelNotFoundError as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a setting an engine refuses (tts_response_format...)
        print(f"voice-gateway: bad setting: {exc}", file=sys.stderr)
        return 2
    app = create_app(config, models=models, startup=startup)
    try:
        return asyncio.run(serve_until_signalled(app, config.host, config.port, bound))
    except CannotServe as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return exc.status
