"""Supervised child processes of the local control plane.

Every component runs in its own session (so a Ctrl-C aimed at the test runner does not tear
etcd down under a still-running apiserver) and writes to its own log file. A separate reaper
process watches the owner: when the owner dies without stopping the control plane (SIGKILL, a
crash), the reaper kills every component, so no process and no port outlives a killed test run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path


class Process:
    """One component: started detached, logged to a file, stopped with TERM then KILL."""

    def __init__(self, name: str, args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name = name
        self.args = list(args)
        self.log = log
        self.env = env
        self._popen: subprocess.Popen[bytes] | None = None
        self.pid: int | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self._popen = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
            )
        self.pid = self._popen.pid

    def alive(self) -> bool:
        if self._popen is not None:
            return self._popen.poll() is None
        return self.pid is not None and pid_alive(self.pid)

    def exit_code(self) -> int | None:
        return self._popen.poll() if self._popen is not None else None

    def stop(self, timeout: float = 10.0) -> None:
        if self.pid is None:
            return
        terminate_group(self.pid, timeout=timeout, popen=self._popen)

    def log_tail(self, lines: int = 25) -> str:
        try:
            data = self.log.read_bytes()[-16384:].decode(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(data.splitlines()[-lines:])


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def terminate_group(pid: int, *, timeout: float = 10.0, popen: subprocess.Popen[bytes] | None = None) -> None:
    """SIGTERM the process group led by ``pid``, wait, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen is not None:
            if popen.poll() is not None:
                break
        elif not pid_alive(pid):
            break
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if popen is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=5)


class Reaper:
    """A watchdog process that kills the given process groups when the owner process dies."""

    def __init__(self, pid_file: Path, cleanup_dir: Path | None = None) -> None:
        self.pid_file = pid_file
        self.cleanup_dir = cleanup_dir
        self._popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._popen = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubeop.testing._reaper",
                str(os.getpid()),
                str(self.pid_file),
                str(self.cleanup_dir or ""),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def watch(self, pids: Sequence[int]) -> None:
        """Tell the reaper which groups to kill (rewritten atomically on every change)."""
        tmp = self.pid_file.with_suffix(".tmp")
        tmp.write_text("\n".join(str(p) for p in pids))
        tmp.replace(self.pid_file)

    def stop(self) -> None:
        if self._popen is not None and self._popen.poll() is None:
            self._popen.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen.wait(timeout=5)
        self._popen = None
