"""The test rigs' processes end with the test run, however it ends: a service started in its own
session (:class:`~tests.ops.services.Service`: Janus, rtpengine, coturn...) gets SIGTERM from the
kernel when the run is killed (SIGKILL, a CI job's timeout) instead of living on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.ops.services import ROOT


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_service_ends_when_the_test_run_is_killed(tmp_path):
    # A stand-in for the test run: it starts a service (a sleep in its own session), says its pid,
    # and waits; it is then killed with SIGKILL, which runs none of its clean-up.
    run = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from tests.ops.services import Service
        service = Service("sleeper", ["sleep", "60"], Path({str(tmp_path / "sleeper.log")!r}))
        print(service.process.pid, flush=True)
        time.sleep(60)
        """
    )
    runner = subprocess.Popen([sys.executable, "-c", run], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    service = 0
    try:
        assert runner.stdout is not None
        service = int(runner.stdout.readline())
        # Started: setpriv has set the parent-death signal and exec'd the command (before that a
        # killed parent goes unnoticed: the signal is set in the child, after the fork).
        for _ in range(100):
            if Path(f"/proc/{service}/cmdline").read_bytes().startswith(b"sleep\0"):
                break
            time.sleep(0.1)
        assert alive(service)
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
        for _ in range(100):  # up to 10 s
            if not alive(service):
                break
            time.sleep(0.1)
        assert not alive(service), f"the service {service} outlived the run"
    finally:
        runner.kill()
        runner.wait(10)
        if service and alive(service):
            os.kill(service, signal.SIGKILL)
