"""``voice-gateway serve ...`` (also ``python -m gateway serve``)."""

from __future__ import annotations

import argparse
import logging
import sys

from gateway.config import GatewayConfig


def build_parser() -> argparse.ArgumentParser:
    """The ``serve`` and ``prepare`` subcommands; both take every GatewayConfig setting as a flag."""
    parser = argparse.ArgumentParser(prog="voice-gateway", description="WebRTC voice gateway")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway (HTTP signaling + WebRTC media)")
    GatewayConfig.add_arguments(serve)
    prepare = commands.add_parser("prepare", help="load (and convert, once) the configured models, then exit")
    GatewayConfig.add_arguments(prepare)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Console entry point (``argv`` defaults to ``sys.argv[1:]``); returns the exit status.

    0 on success, 1 when model weights are missing, 2 for a setting that does not parse (argparse
    itself exits with 2 on an unknown flag).
    """
    args = build_parser().parse_args(argv)
    try:
        config = GatewayConfig.from_args(args)
    except ValueError as exc:
        print(f"voice-gateway: bad setting: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=config.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return serve(config)
    if args.command == "prepare":
        return prepare(config)
    return 2


def prepare(config: GatewayConfig) -> int:
    """Load the models once so the one-time work (joining Whisper, converting the GGUF) lands in
    ``model_cache_dir`` ahead of serving, e.g. while building an image. 0, or 1 if weights are missing."""
    from gateway.models.base import ModelNotFoundError
    from gateway.models.loader import load_models

    try:
        load_models(config)
    except ModelNotFoundError as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return 1
    print(f"voice-gateway: models ready (cache {config.model_cache_dir})")
    return 0


def serve(config: GatewayConfig) -> int:
    """Load the models, then run the aiohttp app until SIGINT/SIGTERM (blocks the calling thread).

    Models load before the port opens, so a listening gateway can take calls. Returns 1 without
    serving if weights are missing, else 0 after shutdown.
    """
    from aiohttp import web

    from gateway.models.base import ModelNotFoundError
    from gateway.models.loader import load_models
    from gateway.server.app import create_app

    try:
        models = load_models(config)
    except ModelNotFoundError as exc:
        print(f"voice-gateway: {exc}", file=sys.stderr)
        return 1
    app = create_app(config, models=models)
    print(f"voice-gateway: serving on http://{config.host}:{config.port} (pool of {config.pool_size})", flush=True)
    web.run_app(app, host=config.host, port=config.port, print=None)
    return 0
