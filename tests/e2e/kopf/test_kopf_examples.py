"""kopf's own examples, run on kubeop's runtime with only the import changed.

The examples are not in this repository: the test fetches kopf's source distribution at a pinned
version (``pip download kopf==1.45.2 --no-deps --no-binary :all:`` from the package index, checked
against its sha256) into a cache, rewrites ``import kopf`` to ``import kubeop.kopf as kopf`` in a
temporary copy, and runs it with ``python -m kubeop.kopf run``. The checks are those of kopf's
tests/e2e/test_examples.py (rewritten here, not copied): the operator exits cleanly, logs the
cycle's lines for the object, each handler succeeds (or fails for good) the expected number of
times, and no traceback unless the example expects one. kopf's test uses the namespace
``default``; this one a fresh namespace per example.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.testing import ControlPlane
from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist, rewrite_imports

pytestmark = pytest.mark.controlplane


@dataclass
class Expect:
    creation_word: str = "Creation is processed:"
    allow_tracebacks: bool = False
    success_counts: dict[str, int] | None = None  # None: every handler that succeeds, once
    failure_counts: dict[str, int] = field(default_factory=dict)
    output: tuple[str, ...] = ()
    deletion_words: tuple[str, ...] = ()


EXAMPLES: dict[str, Expect] = {
    "01-minimal": Expect(creation_word="'create_fn' succeeded", output=("And here we are! Creating:",)),
    "03-exceptions": Expect(
        allow_tracebacks=True,
        success_counts={"eventual_success_with_a_few_messages": 1},
        failure_counts={
            "eventual_failure_with_tracebacks": 1,
            "instant_failure_with_traceback": 1,
            "instant_failure_with_only_a_message": 1,
        },
    ),
    "04-events": Expect(),
    "05-handlers": Expect(output=("CREATED 1st", "CREATED 2nd", "DELETED 1st", "DELETED 2nd")),
    "07-subhandlers": Expect(
        output=("=== Handling creation for item1. ===", "=== Handling creation for item2. ==="),
    ),  # create_fn, create_fn/item1, create_fn/item2: each succeeds once
    "08-events": Expect(
        creation_word="'normal_event_fn' succeeded",
        allow_tracebacks=True,
        success_counts={"normal_event_fn": 2},  # ADDED and DELETED: no finalizer, no other writes
    ),
    "14-daemons": Expect(
        creation_word="=> Ping from a sync daemon",
        deletion_words=(
            "'background_async' is cancelled",
            "'background_async' has exited",
            "Daemon 'background_sync' succeeded",  # a thread is waited for, never cancelled (kopf)
        ),
        success_counts={},  # daemons retried 3 times, then pinging: not once-only handlers
    ),
    # Each timer call logs its success (not a once-only handler); the async timer waits for 10 s
    # of idleness, longer than this test waits (kopf's own run deletes the object earlier too).
    "15-timers": Expect(creation_word="Ping from a sync timer", success_counts={}),
    # The timer gets both indices (its first call prints by_label's dict); the probes get them too.
    "16-indexing": Expect(creation_word="'intervalled' succeeded", success_counts={}),
}


@pytest.fixture(scope="module")
def kopf_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kopf's examples/ from its pinned sdist (downloaded once into the cache, hash-checked)."""
    sdist = kopf_sdist()
    out = tmp_path_factory.mktemp("kopf-sdist")
    prefix = f"kopf-{KOPF_VERSION}/examples/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.isfile()]
        tar.extractall(out, members=members, filter="data")
    return out / prefix


class Operator:
    """``python -m kubeop.kopf run example.py`` in a subprocess, its output collected by a thread."""

    def __init__(self, cp: ControlPlane, script: Path, namespace: str) -> None:
        env = dict(cp.env(), PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "kubeop.kopf", "run", str(script), "-n", namespace, "--verbose"],
            env=env,
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

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, word: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while word not in self.output:
            if self.popen.poll() is not None:
                raise AssertionError(f"the operator exited ({self.popen.returncode}):\n{self.output[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {word!r} within {timeout:.0f} s:\n{self.output[-4000:]}")
            time.sleep(0.05)

    def wait_until_counted(self, counts: dict[str, int], timeout: float = 30.0) -> None:
        """Wait until each handler's "succeeded" line appears ``counts`` times (or fail)."""
        deadline = time.monotonic() + timeout
        while True:
            succeeded = collections.Counter(re.findall(r"'(.+?)' succeeded", self.output))
            if all(succeeded[name] >= n for name, n in counts.items()):
                return
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"not {counts} successes: {dict(succeeded)}:\n{self.output[-4000:]}")
            time.sleep(0.05)

    def stop(self) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(30)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise


def _kubectl_like(cp: ControlPlane, method: str, path: str, body: Any = None) -> Any:
    return cp.api.call(method, path, body)


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_kopf_example(
    example: str, kopf_examples: Path, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    expect = EXAMPLES[example]
    control_plane.install_crds([kopf_examples / "crd.yaml"])
    source = (kopf_examples / example / "example.py").read_text()
    rewritten, n = rewrite_imports(source)
    assert n == 1, f"{example}: expected one 'import kopf' line"
    script = tmp_path / "example.py"
    script.write_text(rewritten)
    obj = yaml.safe_load((kopf_examples / "obj.yaml").read_text())
    name = obj["metadata"]["name"]
    base = f"/apis/kopf.dev/v1/namespaces/{namespace}/kopfexamples"
    prefix = f"[{namespace}/{name}]"

    op = Operator(control_plane, script, namespace)
    try:
        op.wait_for("all controllers started")
        _kubectl_like(control_plane, "POST", base, obj)
        op.wait_for(
            f"{prefix} {expect.creation_word}"
            if expect.creation_word.startswith("Creation")
            else expect.creation_word
        )
        _kubectl_like(control_plane, "DELETE", f"{base}/{name}")
        op.wait_for(f"{prefix} Deleted, really deleted")
        for word in expect.deletion_words:
            op.wait_for(word)
        if expect.success_counts is not None:
            # kubeop.kopf runs @kopf.on.event handlers beside the change handlers, not before them
            # in one task as kopf does: the last event's handler may still be running when the
            # deletion is logged. Wait (bounded) for every expected success before stopping.
            op.wait_until_counted(expect.success_counts)
    finally:
        code = op.stop()
    output = op.output
    assert code == 0, output[-4000:]

    source_has = lambda kind: f"@kopf.on.{kind}(" in source  # noqa: E731 - a one-line predicate
    mandatory_delete = source_has("delete") and "optional=True" not in source
    if mandatory_delete:
        assert f"{prefix} Adding the finalizer" in output
        assert f"{prefix} Deletion is in progress:" in output
    if source_has("create"):
        assert f"{prefix} Creation is in progress:" in output
    assert f"{prefix} Deleted, really deleted" in output
    if not expect.allow_tracebacks:
        assert "Traceback (most recent call last):" not in output, output[-4000:]
    for text in expect.output:
        assert text in output, f"{text!r} not in the output"

    succeeded = re.findall(r"'(.+?)' succeeded", output)
    if expect.success_counts is None:
        assert succeeded and set(collections.Counter(succeeded).values()) == {1}, succeeded
    else:
        counted = collections.Counter(n for n in succeeded if n in expect.success_counts)
        assert counted == expect.success_counts
    failed = collections.Counter(
        re.findall(r"'(.+?)' failed (?:permanently|with an exception and will stop)", output)
    )
    assert failed == expect.failure_counts
