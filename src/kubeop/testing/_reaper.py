"""``python -m kubeop.testing._reaper OWNER PID_FILE [DIR]``: kill the listed groups when OWNER dies.

DIR, when given, is the owner's temporary data directory, removed after the kill.

Waits on a pidfd of the owner (no polling); on SIGTERM it exits without killing anything (the
owner stopped the control plane itself).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
from pathlib import Path

from kubeop.testing.process import terminate_group


def main(argv: list[str]) -> int:
    owner, pid_file = int(argv[1]), Path(argv[2])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        fd = -1
    if fd >= 0:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(None):
            pass
    try:
        pids = [int(x) for x in pid_file.read_text().split()]
    except (OSError, ValueError):
        return 0
    # Stop the API consumers first and etcd last, as a clean shutdown would.
    for pid in reversed(pids):
        terminate_group(pid, timeout=5.0)
    if len(argv) > 3 and argv[3]:
        shutil.rmtree(argv[3], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
