"""Starting, stopping, killing and reusing control planes leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubeop.testing import ControlPlane, ControlPlaneError
from kubeop.testing.controlplane import port_in_use
from kubeop.testing.process import pid_alive

pytestmark = pytest.mark.controlplane


def _port_free(port: int) -> bool:
    return not port_in_use(port)


def _wait_gone(pids: list[int], ports: list[int], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(pid_alive(p) for p in pids) and all(_port_free(p) for p in ports):
            return
        time.sleep(0.1)
    alive = [p for p in pids if pid_alive(p)]
    busy = [p for p in ports if not _port_free(p)]
    raise AssertionError(f"left behind: pids {alive}, ports {busy}")


def test_stop_leaves_no_process_port_or_directory_and_restart_is_warm() -> None:
    messages: list[str] = []
    cp = ControlPlane(full=False, progress=messages.append).start()
    pids = [p.pid for p in cp._procs.values() if p.pid]
    ports = list(cp.ports.values())
    data_dir = cp.data_dir
    assert len(pids) == 2 and cp.api.ok("/readyz")
    cp.stop()
    _wait_gone(pids, ports, timeout=1.0)
    assert not data_dir.exists()
    messages.clear()
    started = time.monotonic()
    with ControlPlane(full=False, progress=messages.append) as again:
        assert again.api.ok("/readyz")
    assert not any("building" in m for m in messages), messages
    assert time.monotonic() - started < 60


def test_a_killed_owner_leaves_nothing_behind(tmp_path: Path) -> None:
    script = (
        "import json, sys, time\n"
        "from kubeop.testing import ControlPlane\n"
        "cp = ControlPlane(full=False).start()\n"
        "print(json.dumps({'pids': [p.pid for p in cp._procs.values()], 'ports': list(cp.ports.values()),"
        " 'dir': str(cp.data_dir)}), flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    info = json.loads(owner.stdout.readline())
    assert all(pid_alive(p) for p in info["pids"])
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait()
    _wait_gone(info["pids"], info["ports"])
    deadline = time.monotonic() + 10
    while Path(info["dir"]).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(info["dir"]).exists()


def test_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        cp = ControlPlane(full=False, apiserver_port=port)
        with pytest.raises(ControlPlaneError, match=rf"port {port} .* already in use.*--port 0"):
            cp.start()


def _kubeop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubeop", *args], capture_output=True, text=True, timeout=120
    )


def test_cluster_cli_up_is_idempotent_recovers_a_killed_run_and_down_cleans(tmp_path: Path) -> None:
    data = str(tmp_path / "cluster")
    up = _kubeop("cluster", "up", "--minimal", "--data-dir", data)
    assert up.returncode == 0, up.stderr
    kubeconfig = up.stdout.strip()
    assert Path(kubeconfig).is_file()
    state = json.loads((tmp_path / "cluster" / "state.json").read_text())
    again = _kubeop("cluster", "up", "--minimal", "--data-dir", data)
    assert again.returncode == 0 and "already running" in again.stderr
    assert json.loads((tmp_path / "cluster" / "state.json").read_text())["pids"] == state["pids"]
    assert _kubeop("cluster", "status", "--data-dir", data).returncode == 0

    # A killed run: the apiserver dies behind the CLI's back; status says so, up repairs it.
    os.killpg(state["pids"]["kube-apiserver"], signal.SIGKILL)
    time.sleep(0.5)
    status = _kubeop("cluster", "status", "--data-dir", data)
    assert status.returncode == 1 and "STOPPED" in status.stdout
    repaired = _kubeop("cluster", "up", "--minimal", "--data-dir", data)
    assert repaired.returncode == 0, repaired.stderr
    assert "restarting" in repaired.stderr
    assert repaired.stdout.strip() == kubeconfig  # same identity and port: old kubeconfigs keep working
    cp = ControlPlane.attach(data)
    assert cp is not None and cp.healthy()
    assert cp.api.call("GET", "/api/v1/namespaces/default")["metadata"]["name"] == "default"
    new_state = json.loads((tmp_path / "cluster" / "state.json").read_text())

    down = _kubeop("cluster", "down", "--data-dir", data)
    assert down.returncode == 0
    _wait_gone(list(new_state["pids"].values()), list(new_state["ports"].values()))
    assert not (tmp_path / "cluster").exists()
    assert _kubeop("cluster", "status", "--data-dir", data).returncode == 3


def test_starts_on_a_machine_without_a_default_route(tmp_path: Path) -> None:
    """In a fresh network namespace only loopback exists: kube-apiserver needs explicit settings."""
    script = (
        "import subprocess\n"
        "subprocess.run(['ip', 'link', 'set', 'lo', 'up'], check=True)\n"
        "from kubeop.testing.controlplane import ControlPlane, has_default_route\n"
        "assert not has_default_route()\n"
        "with ControlPlane(full=False) as cp:\n"
        "    print(cp.api.call('GET', '/api/v1/namespaces/default')['metadata']['name'])\n"
    )
    res = subprocess.run(
        ["unshare", "--net", sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == "default"
