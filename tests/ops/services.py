"""Real processes for the operations tests: gateway processes (``python -m gateway serve``), coturn
and nginx, each on free loopback ports, with their output in a log file, always stopped after.

coturn and nginx are Debian packages (``scripts/setup.sh --services``); without them the tests
skip, except under CI, where they fail.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Optional

import aiohttp

from gateway.server.runner import free_port
from tests import helpers

ROOT = Path(__file__).resolve().parents[2]
# Small, fast models for the process tests: they start in seconds and answer in well under one.
FAST_MODELS = ["--llm-model", "smollm2-135m", "--turn-detector", "silence", "--llm-threads", "1"]
# Admission by a fixed talking capacity, not this machine's measured decode speed (deterministic).
FIXED_CAPACITY = ["--talking-capacity", "16"]


def unavailable(reason: str) -> None:
    """Skip on a machine without the service, but fail under CI (setup.sh --services installs it).
    Also fails where scripts/setup.sh --browser --services ran (tests.helpers.unavailable)."""
    helpers.unavailable(reason)


def require(binary: str, package: str) -> str:
    """The path of ``binary``, or skip/fail naming the Debian ``package``."""
    for folder in ("/usr/sbin", "/usr/bin"):
        candidate = Path(folder) / binary
        if candidate.exists():
            return str(candidate)
    found = shutil.which(binary)
    if found is None:
        unavailable(f"{binary} not found: install Debian's {package} (scripts/setup.sh --services)")
    assert found is not None
    return found


SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"


def tied_to_this_process(argv: list[str]) -> list[str]:
    """``argv`` to run so that the kernel sends the process SIGTERM when this one (the test run) dies,
    however it dies (SIGKILL, a CI job's timeout): a service in its own session, or one a killed
    pytest leaves, would outlive the run otherwise. ``setpriv`` (util-linux) sets the parent-death
    signal (``prctl(PR_SET_PDEATHSIG)``, kept across ``execve``) and runs ``argv``. Start the process
    from the main thread: the signal comes when the thread that started it ends."""
    return [SETPRIV, "--pdeathsig", "TERM", "--", *argv]


class Service:
    """A child process in its own session (so it and its children can be signalled together),
    writing stdout and stderr to ``log_path``; it gets SIGTERM if the test run dies without
    stopping it (:func:`tied_to_this_process`)."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_path: Path,
        env: Optional[dict[str, str]] = None,
        cwd: Optional[Path] = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "wb")  # closed in stop()
        self.process = subprocess.Popen(
            tied_to_this_process(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )

    @property
    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace")

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the process only (not its session)."""
        self.process.send_signal(signum)

    def stop(self, timeout: float = 10.0) -> Optional[int]:
        """SIGTERM, then SIGKILL after ``timeout`` s; returns the exit status."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.process.wait(5)
        self._log.close()
        return self.process.returncode


class ServiceRig:
    """Base of a test's ``async with`` rig around one :class:`Service`: its ``__aenter__`` calls
    :meth:`_start` with the service and a wait for it to be ready; leaving stops the service."""

    service: Optional[Service] = None

    async def _start(self, service: Service, ready: Awaitable[bool]) -> None:
        """Keep ``service``; stop it and raise AssertionError (with its log) unless ``ready`` is
        true (stop it also if ``ready`` raises)."""
        self.service = service
        try:
            assert await ready, f"{service.name} did not get ready:\n{service.log[-3000:]}"
        except BaseException:
            service.stop()
            raise

    @property
    def log(self) -> str:
        """Everything the process wrote so far ("" before it started)."""
        return self.service.log if self.service is not None else ""

    async def __aexit__(self, *exc: object) -> None:
        if self.service is not None:
            self.service.stop()


def start_gateway(
    tmp_path: Path, *flags: str, name: str = "gateway", port: Optional[int] = None, env: Optional[dict[str, str]] = None
) -> tuple[Service, str]:
    """``python -m gateway serve`` on a free loopback port with the fast models and ``flags``;
    returns (service, base URL). Wait for it with :func:`wait_healthy`."""
    port = port or free_port()
    argv = [
        sys.executable,
        "-m",
        "gateway",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *FAST_MODELS,
        *FIXED_CAPACITY,
        *flags,
    ]
    child_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    service = Service(name, argv, tmp_path / f"{name}.log", env=child_env, cwd=ROOT)
    return service, f"http://127.0.0.1:{port}"


async def wait_healthy(service: Service, url: str, within_s: float = 90.0) -> None:
    """Poll ``url``/healthz until 200; AssertionError (with the log) if the process exits or
    ``within_s`` seconds pass first."""
    deadline = time.monotonic() + within_s
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            assert service.process.poll() is None, f"{service.name} exited:\n{service.log[-3000:]}"
            try:
                async with http.get(f"{url}/healthz", timeout=aiohttp.ClientTimeout(total=2)) as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"{service.name} not healthy in {within_s} s:\n{service.log[-3000:]}")


async def wait_exit(service: Service, within_s: float) -> Optional[int]:
    """The exit status once the process ends, or None after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            return service.process.returncode
        await asyncio.sleep(0.1)
    return None


def port_range(seed: int, width: int) -> tuple[int, int]:
    """(first, last) of ``width`` ports from 20000 up, a range of its own per run (``seed``: a free
    port of the run), for a relay or media server that picks free ports within a range."""
    first = 20000 + (seed % 20000)
    return first, first + width - 1


TURN_USER, TURN_PASSWORD, TURN_REALM = "vg-test", "vg-secret", "voice-gateway-test"


def start_coturn(tmp_path: Path, peer_rules: Optional[list[str]] = None) -> tuple[Service, int]:
    """coturn on 127.0.0.1 (UDP and TCP on a free port, relay ports from a free range), one
    long-term-credential user (:data:`TURN_USER` / :data:`TURN_PASSWORD`), verbose log to its log
    file; returns (service, port). Its peers: ``peer_rules`` (coturn flags such as
    ``--denied-peer-ip=...``), by default loopback peers allowed (the gateway is on this machine)."""
    binary = require("turnserver", "coturn")
    port = free_port()
    relay_low, relay_high = port_range(port, 201)  # coturn picks free ports within it
    argv = [
        binary,
        "-n",
        "--listening-ip=127.0.0.1",
        "--relay-ip=127.0.0.1",
        f"--listening-port={port}",
        f"--min-port={relay_low}",
        f"--max-port={relay_high}",
        "--lt-cred-mech",
        f"--user={TURN_USER}:{TURN_PASSWORD}",
        f"--realm={TURN_REALM}",
        "--no-tls",
        "--no-dtls",
        "--no-cli",
        *(["--allow-loopback-peers"] if peer_rules is None else peer_rules),
        "--fingerprint",
        "--log-file=stdout",
        "--verbose",
        "--simple-log",
        f"--pidfile={tmp_path / 'turnserver.pid'}",
        f"--userdb={tmp_path / 'turndb'}",
    ]
    return Service("coturn", argv, tmp_path / "coturn.log"), port


async def wait_for_log(service: Service, text: str, within_s: float = 10.0) -> bool:
    """True once ``text`` is in the service's log; False after ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if text in service.log:
            return True
        assert service.process.poll() is None, f"{service.name} exited:\n{service.log[-3000:]}"
        await asyncio.sleep(0.1)
    return text in service.log


DEPLOY_NGINX_CONF = ROOT / "deploy" / "nginx.conf"


def start_nginx(tmp_path: Path, listen_port: int, gateways: dict[str, int]) -> Service:
    """nginx in the foreground with the repository's ``deploy/nginx.conf`` (the http-level file the
    compose file mounts), its upstreams ``<name>:8080`` replaced by ``127.0.0.1:<port>`` for each
    ``gateways`` entry (name -> port) and ``listen 80`` by ``127.0.0.1:listen_port``; pid file,
    temp folders and logs in ``tmp_path``, error log on its stderr."""
    binary = require("nginx", "nginx")
    site = DEPLOY_NGINX_CONF.read_text()
    for name, port in gateways.items():
        assert f"{name}:8080" in site, f"deploy/nginx.conf has no upstream {name}:8080"
        site = site.replace(f"{name}:8080", f"127.0.0.1:{port}")
    assert "listen 80;" in site
    site = site.replace("listen 80;", f"listen 127.0.0.1:{listen_port};")
    site = site.replace("/var/log/nginx/access.log", str(tmp_path / "access.log"))
    (tmp_path / "gateways.conf").write_text(site)
    temp_paths = "\n".join(
        f"    {kind}_temp_path {tmp_path / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (tmp_path / "nginx.conf").write_text(f"""daemon off;
master_process on;
worker_processes 1;
user root;
pid {tmp_path / "nginx.pid"};
error_log stderr notice;
events {{ worker_connections 256; }}
http {{
{temp_paths}
    include {tmp_path / "gateways.conf"};
}}
""")
    test = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert test.returncode == 0, f"nginx -t failed:\n{test.stderr}"
    return Service(
        "nginx",
        [binary, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"],
        tmp_path / "nginx.log",
    )
