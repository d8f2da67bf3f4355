"""kopf's API beyond the handlers: execute, lifecycles, logins, and the names kubeop does its own way."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf import logins
from kubeop.kopf.processing import Processor
from tests.unit.kopf.test_cycle import RESOURCE, Store, cycle

log = logging.getLogger("test")


@pytest.fixture(autouse=True)
def default_lifecycle() -> Iterator[None]:
    yield
    kopf.set_default_lifecycle(None)


async def test_execute_runs_the_subhandlers_in_the_handler_and_returns_when_all_are_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []
    failures = iter([kopf.TemporaryError("not yet", delay=0)])
    reg = kopf.Registry()

    def sub_a(**_: Any) -> None:
        calls.append("a")

    async def sub_b(**_: Any) -> None:
        failure = next(failures, None)
        calls.append("b" if failure is None else "b fails")
        if failure is not None:
            raise failure

    @kopf.on.create(RESOURCE, registry=reg)
    async def create(**_: Any) -> None:
        calls.append("before")
        await kopf.execute(fns={"a": sub_a, "b": sub_b})
        calls.append("after")

    p = Processor(RESOURCE, list(reg.changing(RESOURCE)))
    store = Store({"value": "one"})
    await cycle(p, store)
    assert calls == ["before", "a", "b fails"]
    parent_errors = [r for r in caplog.records if r.levelno >= logging.ERROR and "'create'" in r.getMessage()]
    assert not parent_errors, "unfinished sub-handlers are no failure of their parent"
    await asyncio.sleep(0.01)  # past the recorded delay (0 s, stored rounded to the millisecond)
    await cycle(p, store)
    assert calls == ["before", "a", "b fails", "before", "b", "after"]
    await cycle(p, store)
    assert calls[-1] == "after" and len(calls) == 6


async def test_execute_without_fns_runs_the_registered_subhandlers_once() -> None:
    calls: list[str] = []
    reg = kopf.Registry()

    @kopf.on.create(RESOURCE, registry=reg)
    async def create(**_: Any) -> None:
        @kopf.subhandler(id="sub")
        def sub(**_: Any) -> None:
            calls.append("sub")

        await kopf.execute()
        calls.append("after")

    await cycle(Processor(RESOURCE, list(reg.changing(RESOURCE))), Store({"value": "one"}))
    assert calls == ["sub", "after"]


async def test_execute_outside_a_handler_and_with_kopf_internals_is_a_clear_error() -> None:
    with pytest.raises(RuntimeError, match="inside a running"):
        await kopf.execute(fns=[print])
    with pytest.raises(TypeError, match=r"registry=.*not supported.*pass fns="):
        await kopf.execute(registry=kopf.Registry())


async def test_a_lifecycle_set_by_the_operator_chooses_the_handlers_of_a_cycle() -> None:
    calls: list[str] = []
    reg = kopf.Registry()

    @kopf.on.create(RESOURCE, registry=reg)
    def first(**_: Any) -> None:
        calls.append("first")

    @kopf.on.create(RESOURCE, registry=reg)
    def second(**_: Any) -> None:
        calls.append("second")

    kopf.set_default_lifecycle(kopf.lifecycles.one_by_one)
    p = Processor(RESOURCE, list(reg.changing(RESOURCE)))
    store = Store({"value": "one"})
    await cycle(p, store)
    assert calls == ["first"]
    await cycle(p, store)
    assert calls == ["first", "second"]


async def test_the_default_lifecycle_runs_every_due_handler_in_one_cycle() -> None:
    calls: list[str] = []
    reg = kopf.Registry()

    @kopf.on.create(RESOURCE, registry=reg)
    def first(**_: Any) -> None:
        calls.append("first")

    @kopf.on.create(RESOURCE, registry=reg)
    def second(**_: Any) -> None:
        calls.append("second")

    assert kopf.get_default_lifecycle() is kopf.lifecycles.asap
    await cycle(Processor(RESOURCE, list(reg.changing(RESOURCE))), Store({"value": "one"}))
    assert calls == ["first", "second"]


def test_kopf_storages_are_constructible_and_selected_in_settings() -> None:
    storages = [
        kopf.AnnotationsProgressStorage(prefix="my-op.example.com"),
        kopf.StatusProgressStorage(field="status.my-op"),
        kopf.SmartProgressStorage(prefix="my-op.example.com"),
        kopf.MultiProgressStorage([kopf.AnnotationsProgressStorage()]),
    ]
    bases = [
        kopf.AnnotationsDiffBaseStorage(prefix="my-op.example.com", key="last"),
        kopf.StatusDiffBaseStorage(field="status.my-op.last"),
        kopf.MultiDiffBaseStorage([kopf.AnnotationsDiffBaseStorage()]),
    ]
    settings = kopf.OperatorSettings()
    assert isinstance(settings.persistence.progress_storage, kopf.SmartProgressStorage)  # kopf's defaults
    assert isinstance(settings.persistence.diffbase_storage, kopf.AnnotationsDiffBaseStorage)
    for storage in storages:
        assert isinstance(storage, kopf.ProgressStorage) and "my-op" in repr(storages[0])
        settings.persistence.progress_storage = storage
        assert settings.persistence.progress_storage is storage
    for base in bases:
        assert isinstance(base, kopf.DiffBaseStorage)
        settings.persistence.diffbase_storage = base
        assert settings.persistence.diffbase_storage is base
    with pytest.raises(TypeError, match=r"progress_storage=.*kopf\.SmartProgressStorage\(\)"):
        settings.persistence.progress_storage = bases[0]  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"diffbase_storage=.*kopf\.AnnotationsDiffBaseStorage\(\)"):
        settings.persistence.diffbase_storage = "annotations"  # type: ignore[assignment]


async def test_what_kubeop_does_its_own_way_says_so_where_it_is_used() -> None:
    with pytest.raises(NotImplementedError, match=r"kopf\.spawn_tasks\(\).*kopf\.operator\("):
        await kopf.spawn_tasks(registry=kopf.Registry())
    with pytest.raises(NotImplementedError, match=r"kopf\.run_tasks\(\).*kopf\.operator\("):
        await kopf.run_tasks([])
    with pytest.raises(TypeError, match=r"return kopf\.ConnectionInfo"):
        kopf.AiohttpSession(aiohttp_session=object())


KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: dev
contexts:
- name: dev
  context: {cluster: c1, user: u1, namespace: team}
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: Q0E=}
users:
- name: u1
  user: {token: secret-token}
"""


def test_login_with_kubeconfig_reads_the_current_context(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(path))
    info = kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())
    assert info is not None
    assert (info.server, info.token, info.ca_data, info.default_namespace, info.priority) == (
        "https://10.0.0.1:6443",
        "secret-token",
        "Q0E=",
        "team",
        logins.PRIORITY_OF_KUBECONFIG,
    )
    assert "secret-token" not in repr(info)
    path.write_text(KUBECONFIG.replace("current-context: dev", "current-context: other"))
    with pytest.raises(kopf.LoginError, match="other"):
        kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())


def test_login_via_pykube_reads_pykubes_kubeconfig(tmp_path: Path, monkeypatch: Any) -> None:
    pytest.importorskip("pykube")
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(path))
    info = kopf.login_via_pykube(logger=log, settings=kopf.OperatorSettings())
    assert info is not None and info.server == "https://10.0.0.1:6443" and info.token == "secret-token"
    assert info.ca_path is not None and Path(info.ca_path).read_bytes() == b"CA"


def test_login_with_service_account_reads_the_pods_token(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(logins, "SERVICE_ACCOUNT", str(tmp_path))
    assert kopf.login_with_service_account(settings=kopf.OperatorSettings()) is None
    (tmp_path / "token").write_text("sa-token\n")
    (tmp_path / "namespace").write_text("ops")
    info = kopf.login_with_service_account(settings=kopf.OperatorSettings())
    assert info is not None
    assert (info.server, info.token, info.default_namespace, info.ca_path) == (
        "https://kubernetes.default.svc",
        "sa-token",
        "ops",
        None,
    )


def test_owner_references_on_dicts_and_pykube_objects() -> None:
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "o", "uid": "u1"}}
    child: dict[str, Any] = {}
    kopf.append_owner_reference([child, child], owner)
    assert child["metadata"]["ownerReferences"] == [kopf.build_owner_reference(owner)]
    assert kopf.build_object_reference(owner) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "o",
        "uid": "u1",
    }
    kopf.remove_owner_reference(child, owner)
    assert child["metadata"]["ownerReferences"] == []
    with pytest.raises(TypeError, match="K8s object class is not supported"):
        kopf.append_owner_reference(object(), owner)


def test_filter_combinators_pass_the_kwargs_on() -> None:
    big = lambda spec, **_: spec["size"] > 10  # noqa: E731
    odd = lambda spec, **_: spec["size"] % 2 == 1  # noqa: E731
    when = kopf.all_([big, kopf.not_(odd)])
    assert when(spec={"size": 12}) and not when(spec={"size": 13}) and not when(spec={"size": 2})
    assert kopf.any_([big, odd])(spec={"size": 3}) and kopf.none_([big, odd])(spec={"size": 2})


def test_login_via_client_configures_the_kubernetes_librarys_default_client(
    tmp_path: Path, monkeypatch: Any
) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG.replace("Q0E=", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="))
    monkeypatch.setenv("KUBECONFIG", str(path))
    kubernetes = pytest.importorskip("kubernetes")
    # the library reads $KUBECONFIG when first imported (as under kopf): point it at this one
    monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    info = kopf.login_via_client(logger=log, settings=kopf.OperatorSettings())
    assert info is not None and info.server == "https://10.0.0.1:6443"
    assert (info.scheme, info.token, info.priority) == ("Bearer", "secret-token", logins.PRIORITY_OF_CLIENT)
    api = kubernetes.client.CoreV1Api()  # a handler's client, built without loading a config
    assert api.api_client.configuration.host == "https://10.0.0.1:6443"


def test_object_loggers_build_as_in_kopf(caplog: pytest.LogCaptureFixture) -> None:
    body = {"metadata": {"name": "n", "namespace": "ns"}}
    caplog.set_level(logging.INFO, logger="kubeop.kopf.objects")
    kopf.ObjectLogger(body=body, settings=kopf.OperatorSettings()).info("hello")
    kopf.LocalObjectLogger(body=body, settings=kopf.OperatorSettings()).info("local")
    assert [r.getMessage() for r in caplog.records] == ["[ns/n] hello", "[ns/n] local"]


_DEFAULT_LOGIN = """
import logging, sys
from kubeop.kopf.running import login_via_kubeop
login_via_kubeop(logging.getLogger("t"))
print("imported by the login:", "kubernetes" in sys.modules)
import kubernetes
print("host:", kubernetes.client.CoreV1Api().api_client.configuration.host)
"""


def test_the_default_login_configures_the_kubernetes_library_only_once_the_operator_imports_it(
    tmp_path: Path,
) -> None:
    """Importing the library costs an operator ~20 MB: the default login never imports it, and
    configures its default client when the operator first does (as kopf's login would have)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("kubernetes")
    path = tmp_path / "config"
    path.write_text(KUBECONFIG.replace("Q0E=", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="))
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env.update(KUBECONFIG=str(path), HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", _DEFAULT_LOGIN], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["imported by the login: False", "host: https://10.0.0.1:6443"]
