"""kubeop create webhook + kubeop run: the scaffolded validator, served from the local process,
called by the real API server (a control plane of this module's own: configurations are cluster-wide)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeop.testing import ControlPlane
from kubeop.webhook import local_certificates
from tests.e2e.cli.conftest import DOMAIN, kubeop, ok, scaffold

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        yield plane


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_kubeop_run_serves_the_scaffolded_validator(cp: ControlPlane, tmp_path: Path) -> None:
    root = scaffold(tmp_path, "hooks-operator", "hooks", "Note")
    ok(
        kubeop(
            "create",
            "webhook",
            "--group",
            "hooks",
            "--version",
            "v1",
            "--kind",
            "Note",
            "--programmatic-validation",
            "--defaulting",
            cwd=root,
        )
    )
    ok(kubeop("install", cwd=root, kubeconfig=cp.kubeconfig_path))
    certs = tmp_path / "certs"
    local_certificates(certs)
    port = _free_port()
    env = {**os.environ, "KUBECONFIG": cp.kubeconfig_path}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubeop",
            "run",
            "--",
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            "--webhook-bind-address",
            f"127.0.0.1:{port}",
            "--webhook-cert-dir",
            str(certs),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        note = {
            "apiVersion": f"hooks.{DOMAIN}/v1",
            "kind": "Note",
            "metadata": {"name": "n", "namespace": "default"},
            "spec": {"foo": "forbidden"},
        }
        deadline = time.monotonic() + 60
        while True:
            res = cp.kubectl("create", "-f", "-", input=json.dumps(note), check=False)
            if (
                "must not be 'forbidden'" in res.stderr
                or time.monotonic() > deadline
                or proc.poll() is not None
            ):
                break
            if res.returncode == 0:  # created before the webhook was registered: try again
                cp.kubectl("delete", f"notes.hooks.{DOMAIN}", "n", "-n", "default", "--wait=true")
            time.sleep(0.3)
        assert "The Note \"n\" is invalid: spec.foo: must not be 'forbidden'" in res.stderr, res.stderr
        note["spec"]["foo"] = "fine"
        assert cp.kubectl("create", "-f", "-", input=json.dumps(note), check=False).returncode == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    assert "applied ValidatingWebhookConfiguration hooks-operator-webhook-validating" in out, out
