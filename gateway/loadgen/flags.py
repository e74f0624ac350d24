"""The ``voice-gateway loadtest`` flags, apart from the load generator itself, so that building the
command line imports no WebRTC stack."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path


def build_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``loadtest`` flags (added to the subcommand's parser; its
    ``gateway.config_sources.DefaultsHelpFormatter`` ends each help with the flag's default)."""
    parser.add_argument(
        "--speech",
        nargs="+",
        type=Path,
        required=True,
        help="recordings the callers ask: WAV files, or folders with a transcripts.tsv",
    )
    parser.add_argument(
        "--url",
        help="a running gateway; on another host, list this one in its --unlimited-sources (callers from one "
        "address: 429 too_many_sessions past 2) [default none: start one here, on a free loopback port]",
    )
    parser.add_argument("--callers", default="6", help="callers at once, per phase: e.g. 6 or 2,4,6,8")
    parser.add_argument("--turns", type=int, default=3, help="questions per caller")
    parser.add_argument("--think-s", type=float, default=3.0, help="pause after each answer is heard, s")
    parser.add_argument("--stagger-s", type=float, default=1.3, help="ramp-up: between two callers' starts, s")
    parser.add_argument(
        "--transport",
        choices=("webrtc", "websocket"),
        default="webrtc",
        help="how callers call: a WebRTC call each, or the Realtime WebSocket (GET /v1/realtime)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the lone caller before the phases")
    parser.add_argument(
        "--silent",
        type=int,
        default=0,
        help="a phase of this many callers who connect and say nothing (admitted?; 0: none)",
    )
    parser.add_argument(  # None: $VG_API_KEY, read when the run starts (never shown by --help)
        "--api-key", help="the gateway's API key [default $VG_API_KEY]"
    )
    parser.add_argument("--json", type=Path, help="write every turn and sample to this file")
    parser.add_argument("--plot", type=Path, help="write turn latency vs callers to this SVG file")
    parser.add_argument(
        "--gateway-log",
        type=Path,
        default=Path("loadtest-gateway.log"),
        help="where the output of the gateway it starts goes (without --url)",
    )
    parser.add_argument(
        "--gateway-command",
        default=f"{shlex.quote(sys.executable)} -m gateway serve",
        help="how to start the gateway when no --url is given (--host/--port are added)",
    )
    parser.add_argument("gateway_args", nargs=argparse.REMAINDER, help="after --: flags for the started gateway")
    return parser


def api_key(args: argparse.Namespace) -> str:
    """``--api-key``, else ``$VG_API_KEY`` ('' for neither)."""
    return args.api_key if args.api_key is not None else os.environ.get("VG_API_KEY", "")
