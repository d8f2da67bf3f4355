"""The hook that configures the kubernetes library when the operator imports it
(kubeop.kopf._on_import, and the default login's use of it): each callback runs once, after the
package has run, whatever the order of imports and registrations, from one thread or several;
nothing is left behind (no finder, no wrapped loader); a package that is absent, broken or
planted, and a callback that raises, never break the operator's import; a default configuration
the operator loaded itself is kept. Packages of unique names are made in a temporary directory;
the real library is tried in a subprocess."""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeop.kopf import _on_import
from kubeop.kopf._on_import import when_imported
from tests.unit.kopf.test_kopf_api import KUBECONFIG

BOUND = 10.0
_counter = iter(range(1_000_000))


@pytest.fixture
def package(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A fresh top-level package name, importable from ``tmp_path`` (its __init__ to be written)."""
    name = f"kubeop_hook_probe_{os.getpid()}_{next(_counter)}"
    (tmp_path / name).mkdir()
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield name, tmp_path / name / "__init__.py"
    finally:
        sys.path.remove(str(tmp_path))
        for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
            del sys.modules[module]
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "name", None) != name]
        _on_import._waiting.pop(name, None)


def finders(name: str) -> list[object]:
    return [f for f in sys.meta_path if isinstance(f, _on_import._Finder) and f.name == name]


def test_a_package_that_is_not_installed_leaves_no_trace() -> None:
    before = list(sys.meta_path)
    when_imported("kubeop_no_such_package_anywhere", lambda: pytest.fail("called"))
    assert sys.meta_path == before


def test_callbacks_registered_twice_run_once_each_after_the_package_ran(package: tuple[str, Path]) -> None:
    name, init = package
    init.write_text("ready = True\n")
    seen: list[str] = []
    when_imported(name, lambda: seen.append(f"first {sys.modules[name].ready}"))
    when_imported(name, lambda: seen.append("second"))
    assert seen == [] and len(finders(name)) == 1
    module = importlib.import_module(name)
    assert seen == ["first True", "second"]
    importlib.import_module(name)
    importlib.reload(module)
    assert seen == ["first True", "second"]  # once each
    assert not finders(name) and not isinstance(module.__loader__, _on_import._Loader)
    assert module.__spec__ is not None and not isinstance(module.__spec__.loader, _on_import._Loader)
    when_imported(name, lambda: seen.append("after"))  # imported: at once
    assert seen == ["first True", "second", "after"]


def test_a_callback_that_raises_is_logged_and_the_import_and_the_others_go_on(
    package: tuple[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    name, init = package
    init.write_text("")
    seen: list[str] = []
    when_imported(name, lambda: 1 / 0)  # type: ignore[func-returns-value]
    when_imported(name, lambda: seen.append("next"))
    with caplog.at_level(logging.WARNING, "kubeop.kopf"):
        importlib.import_module(name)
    assert seen == ["next"]
    assert any(f"a callback on importing {name} failed" in r.getMessage() for r in caplog.records)


def test_a_broken_package_raises_its_own_error_and_the_callbacks_wait_for_an_import_that_works(
    package: tuple[str, Path],
) -> None:
    name, init = package
    init.write_text("raise RuntimeError('half installed')\n")
    seen: list[str] = []
    when_imported(name, lambda: seen.append("configured"))
    with pytest.raises(RuntimeError, match="half installed"):
        importlib.import_module(name)
    assert seen == [] and name not in sys.modules
    init.write_text("fixed = True\n")
    importlib.invalidate_caches()
    sys.modules.pop(name, None)
    importlib.import_module(name)
    assert seen == ["configured"] and not finders(name)


def _gated(init: Path) -> types.ModuleType:
    """``init`` blocks its import until the gate's ``go`` is set (after setting ``started``)."""
    gate = types.ModuleType(f"{init.parent.name}_gate")
    gate.started, gate.go = threading.Event(), threading.Event()  # type: ignore[attr-defined]
    sys.modules[gate.__name__] = gate
    init.write_text(
        f"import {gate.__name__} as gate\ngate.started.set()\nassert gate.go.wait({BOUND})\ncomplete = True\n"
    )
    return gate


@pytest.mark.parametrize("registered_before", [True, False], ids=["through the hook", "past it"])
def test_a_registration_while_another_thread_imports_runs_once_after_the_package_ran(
    package: tuple[str, Path], registered_before: bool
) -> None:
    name, init = package
    gate = _gated(init)
    seen: list[str] = []

    def see(label: str) -> None:
        seen.append(f"{label} {getattr(sys.modules[name], 'complete', False)}")

    if registered_before:
        when_imported(name, lambda: see("early"))
    importer = threading.Thread(target=importlib.import_module, args=(name,))
    importer.start()
    try:
        assert gate.started.wait(BOUND)  # type: ignore[attr-defined]
        registering = threading.Thread(target=when_imported, args=(name, lambda: see("late")))
        registering.start()
        registering.join(0.05)  # still waiting for the package (past the hook) or registered (through it)
        gate.go.set()  # type: ignore[attr-defined]
        registering.join(BOUND)
    finally:
        gate.go.set()  # type: ignore[attr-defined]
        importer.join(BOUND)
    assert sorted(seen) == (["early True", "late True"] if registered_before else ["late True"])
    assert not finders(name)
    del sys.modules[gate.__name__]


def test_many_threads_registering_and_importing_run_each_callback_once(package: tuple[str, Path]) -> None:
    name, init = package
    init.write_text("")
    seen: list[int] = []
    start = threading.Barrier(16)

    def work(i: int) -> None:
        start.wait(BOUND)
        if i % 2:
            importlib.import_module(name)
        else:
            when_imported(name, lambda: seen.append(i))  # list.append is atomic

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND)
    assert sorted(seen) == list(range(0, 16, 2))
    assert not finders(name)


_LOGIN = """
import logging, sys
from kubeop.kopf.running import login_via_kubeop
{before}
login_via_kubeop(logging.getLogger("t"))
import kubernetes
print("host:", kubernetes.client.CoreV1Api().api_client.configuration.host)
login_via_kubeop(logging.getLogger("t"))  # a login again (renewed credentials): its own default, renewed
print("again:", kubernetes.client.CoreV1Api().api_client.configuration.host)
"""


def _login(tmp_path: Path, before: str, pythonpath: str | None = None) -> list[str]:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG.replace("Q0E=", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="))
    other = tmp_path / "other"
    other.write_text(path.read_text().replace("10.0.0.1", "10.9.9.9"))
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env.update(KUBECONFIG=str(path), HOME=str(tmp_path))
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([pythonpath, *filter(None, [os.environ.get("PYTHONPATH")])])
    script = _LOGIN.format(before=before.replace("OTHER", str(other)))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_the_library_imported_before_the_login_is_configured_at_once(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes")
    assert _login(tmp_path, "import kubernetes") == [
        "host: https://10.0.0.1:6443",
        "again: https://10.0.0.1:6443",
    ]


def test_a_default_the_operator_loaded_itself_is_kept(tmp_path: Path) -> None:
    pytest.importorskip("kubernetes")
    before = "import kubernetes\nkubernetes.config.load_kube_config(config_file='OTHER')"
    assert _login(tmp_path, before) == ["host: https://10.9.9.9:6443", "again: https://10.9.9.9:6443"]


def test_a_planted_kubernetes_module_without_the_librarys_parts_is_imported_untouched(tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    (planted / "kubernetes" / "client").mkdir(parents=True)
    (planted / "kubernetes" / "__init__.py").write_text("from kubernetes import client\n")
    (planted / "kubernetes" / "client" / "__init__.py").write_text(
        "class CoreV1Api:\n"
        "    class api_client:\n"
        "        class configuration:\n"
        "            host = 'planted'\n"
    )
    assert _login(tmp_path, "", pythonpath=str(planted)) == ["host: planted", "again: planted"]
