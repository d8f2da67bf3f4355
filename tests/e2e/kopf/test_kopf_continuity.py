"""Continuity between real kopf 1.45.2 and kubeop.kopf on the real control plane: an operator
stopped in the middle of a creation (handler a done, b retrying, c not yet run) under one is
restarted under the other and finishes without re-running a; an update made while the other
one handled the object last is seen as a diff of what that one handled (the diff-base).

The operator file is the same for both, only its import changed (as the peer tests change it);
the environment says whether b may pass and c may run. Each handler counts its runs in the
object's status (a kind without a status subresource: kopf and kubeop.kopf both keep the state
in kopf's annotations), so "ran once" is read from the server, not from any output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubeop.testing import ControlPlane
from tests.e2e.kopf.real_kopf import real_kopf_python
from tests.e2e.kopf.sdist import rewrite_imports

pytestmark = pytest.mark.controlplane

GROUP = "continuity.kubeop.dev"


def crd(plural: str, kind: str, status_subresource: bool) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
    }
    if status_subresource:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced",
            "versions": [version],
        },
    }


OPERATOR = """
import os

import kopf

RESOURCE = ("GROUP", "v1", "PLURAL")


def count(name, patch, status):
    patch.status["ran-" + name] = int(status.get("ran-" + name, 0)) + 1


@kopf.on.startup()
def configure(settings, **_):
    settings.posting.enabled = False


@kopf.on.create(*RESOURCE, id="a")
def a(patch, status, **_):
    count("a", patch, status)


@kopf.on.create(*RESOURCE, id="b")
def b(patch, status, **_):
    count("b", patch, status)
    if os.environ["B_PASSES"] != "1":
        raise kopf.TemporaryError("b is not ready yet", delay=1)


@kopf.on.create(*RESOURCE, id="c", when=lambda **_: os.environ["C_RUNS"] == "1")
def c(patch, status, **_):
    count("c", patch, status)


@kopf.on.update(*RESOURCE, id="u", field="spec.x")
def u(old, new, patch, status, **_):
    patch.status["updates"] = list(status.get("updates", [])) + [f"{old}->{new}"]
"""


class Operator:
    """The operator file run by real kopf or by kubeop.kopf, its output kept for failures."""

    def __init__(
        self, cp: ControlPlane, which: str, tmp: Path, namespace: str, plural: str, **env: str
    ) -> None:
        operator = OPERATOR.replace("GROUP", GROUP).replace("PLURAL", plural)
        if which == "kopf":
            script = tmp / "operator_kopf.py"
            script.write_text(operator)
            cmd = [str(real_kopf_python()), "-m", "kopf", "run", str(script), "--standalone"]
            environ = dict(cp.env(), PYTHONUNBUFFERED="1", **env)
            environ.pop("PYTHONPATH", None)
        else:
            source, n = rewrite_imports(operator)
            assert n == 1
            script = tmp / "operator_kubeop.py"
            script.write_text(source)
            cmd = [sys.executable, "-m", "kubeop.kopf", "run", str(script), "--standalone"]
            environ = dict(cp.env(), PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1", **env)
        self.which = which
        self.popen = subprocess.Popen(
            [*cmd, "-n", namespace, "--verbose"],
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self.lines.append(line.rstrip("\n"))

    def tail(self) -> str:
        return f"--- {self.which} ---\n" + "\n".join(self.lines[-60:])

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(10)
            raise AssertionError(f"{self.which} did not stop within 30 s:\n{self.tail()}") from None


def until(what: str, check: Callable[[], Any], op: Operator, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if op.popen.poll() is not None:
            raise AssertionError(f"{op.which} exited ({op.popen.returncode}) before {what}:\n{op.tail()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:.0f} s:\n{op.tail()}")
        time.sleep(0.1)


def progress(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The handlers' progress records, in kopf's annotations or in status.kopf.progress."""
    in_status = ((obj.get("status") or {}).get("kopf") or {}).get("progress") or {}
    out = {k: v for k, v in in_status.items() if v}
    annotations = obj["metadata"].get("annotations") or {}
    out.update(
        (k.split("/", 1)[1], json.loads(v))
        for k, v in annotations.items()
        if k.startswith("kopf.zalando.org/") and k.split("/", 1)[1] in ("a", "b", "c", "u")
    )
    return out


@pytest.mark.parametrize("subresource", [False, True], ids=["no-status-subresource", "status-subresource"])
@pytest.mark.parametrize("first,then", [("kopf", "kubeop"), ("kubeop", "kopf")])
def test_stopped_midway_under_one_finishes_under_the_other(
    first: str, then: str, subresource: bool, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """With a status subresource the handlers' counts go to it: kubeop.kopf keeps the state of an
    object kopf never handled in kopf's status formats (status.kopf.progress is read by kopf's
    default storage), and keeps kopf's annotations of an object kopf handled."""
    plural, kind = ("gadgets", "Gadget") if subresource else ("widgets", "Widget")
    control_plane.install_crds([crd(plural, kind, subresource)])
    base = f"/apis/{GROUP}/v1/namespaces/{namespace}/{plural}"

    def get() -> dict[str, Any]:
        obj: dict[str, Any] = control_plane.api.call("GET", f"{base}/w")
        return obj

    def status() -> dict[str, Any]:
        return dict(get().get("status") or {})

    def change(x: int) -> None:
        control_plane.api.call("PATCH", f"{base}/w", {"spec": {"x": x}}, "application/merge-patch+json")

    control_plane.api.call(
        "POST",
        base,
        {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "w"}, "spec": {"x": 1}},
    )

    # 1. Under the first: a is done, b fails and waits, c may not run yet; stopped there.
    op = Operator(control_plane, first, tmp_path, namespace, plural, B_PASSES="0", C_RUNS="0")
    try:
        midway = until(
            "a done and b retrying",
            lambda: (
                (p := progress(get())).get("a", {}).get("success") and p.get("b", {}).get("retries", 0) >= 1
            ),
            op,
        )
        assert midway
    finally:
        op.stop()
    obj = get()
    assert progress(obj)["a"]["success"] is True and progress(obj)["a"]["purpose"] == "create"
    assert not progress(obj)["b"].get("success") and "c" not in progress(obj)
    assert "kopf.zalando.org/last-handled-configuration" not in (obj["metadata"].get("annotations") or {})
    assert obj["status"]["ran-a"] == 1 and "ran-c" not in obj["status"]

    # 2. Under the other: b passes, c runs, a does not run again; the state is purged.
    op = Operator(control_plane, then, tmp_path, namespace, plural, B_PASSES="1", C_RUNS="1")
    try:
        until("c done", lambda: status().get("ran-c"), op)
        until(
            "the creation recorded",
            lambda: (
                not progress(get())
                and "kopf.zalando.org/last-handled-configuration"
                in (get()["metadata"].get("annotations") or {})
            ),
            op,
        )
        # 3. An update under it: the update handler sees the change.
        change(2)
        until("the first update", lambda: status().get("updates") == ["1->2"], op)
        time.sleep(1.0)  # nothing more may come
    finally:
        op.stop()
    after = status()
    assert after["ran-a"] == 1, f"a ran again under {then}: {after}"
    assert after["ran-c"] == 1 and after["ran-b"] >= 2 and after["updates"] == ["1->2"]

    # 4. A change while nobody runs, then the first one again: it sees the diff from what the
    #    other one handled last (2->3), and runs no creation handler.
    change(3)
    op = Operator(control_plane, first, tmp_path, namespace, plural, B_PASSES="1", C_RUNS="1")
    try:
        until("the second update", lambda: len(status().get("updates", ())) >= 2, op)
        time.sleep(1.0)
    finally:
        op.stop()
    final = status()
    assert final["updates"] == ["1->2", "2->3"], final
    assert final["ran-a"] == 1 and final["ran-c"] == 1, final
    assert not progress(get())
