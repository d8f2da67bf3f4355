"""``kubeop run``'s aggregated API: the project's ``<package>.apiserver`` served from this
process, behind the cluster's kube-apiserver, for as long as the operator runs.

The server listens on ``127.0.0.1`` (a free port) with a fresh CA and serving certificate (for
``<service>.<namespace>.svc``, the name kube-apiserver checks). The cluster gets an
ExternalName Service naming ``127.0.0.1`` and the APIService of the group version, with that CA
as its caBundle: the shape that works on a local control plane (see
docs/concepts/aggregation.md). Both carry the label ``app.kubernetes.io/managed-by=kubeop-run``;
an APIService or Service of that name without it is someone else's (a deployed server) and is
refused, never overwritten. When the operator exits (or this process is told to stop), both are
deleted again: an APIService whose server is gone would make every discovery of the cluster
report the group as unavailable.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubeop.apiserver import APIServer, MemoryStorage, SQLiteStorage, Storage, apiserver_manifests
from kubeop.apiserver.auth import CONFIGMAP_NAME, CONFIGMAP_NAMESPACE
from kubeop.cli.cluster_ops import FIELD_MANAGER, connect
from kubeop.cli.output import say
from kubeop.cli.permissions import Access
from kubeop.client import Client
from kubeop.core.errors import Forbidden, NotFound
from kubeop.core.resource import ApiResource
from kubeop.crd import CustomResource
from kubeop.scaffold import Project
from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.loader import import_tree
from kubeop.webhook import local_certificates

__all__ = [
    "MANAGED_BY",
    "OURS",
    "ForeignObject",
    "LocalApiServer",
    "local_apiserver_objects",
    "register",
    "serve_with_operator",
    "served_kinds",
    "serving_accesses",
    "unregister",
]

MANAGED_BY = "app.kubernetes.io/managed-by"
OURS = "kubeop-run"
_APISERVICES = ApiResource("apiregistration.k8s.io", "v1", "apiservices", kind="APIService", namespaced=False)
_SERVICES = ApiResource("", "v1", "services", kind="Service")
_NAMESPACES = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
_RESOURCES = {"APIService": _APISERVICES, "Service": _SERVICES}
_STOP_GRACE = 30.0  # seconds the operator has to exit after the signal, then it is killed


class ForeignObject(Exception):
    """The cluster has the APIService (or Service) already, and ``kubeop run`` did not make it."""


@dataclass(frozen=True)
class LocalApiServer:
    """What a local run serves: the kinds, and the Service name and namespace they go behind."""

    kinds: list[type[CustomResource]]
    service: str
    namespace: str

    @property
    def hosts(self) -> tuple[str, ...]:
        """The names the serving certificate must cover."""
        return (f"{self.service}.{self.namespace}.svc", "127.0.0.1")


def served_kinds(project: Project) -> LocalApiServer | None:
    """The project's aggregated API (``<package>.apiserver``'s ``kinds()``), None without one."""
    package = f"{project.package}.apiserver"
    if not (project.package_dir / "apiserver" / "__init__.py").is_file():
        return None
    module = import_tree(project.package_root, package, command="run")[0]
    kinds = getattr(module, "kinds", None)
    if not callable(kinds):
        raise ScaffoldError(
            f"{package} has no kinds(): restore it (kubeop create apiserver writes it), "
            "or run with --no-apiserver"
        )
    found = list(kinds())
    if not found:
        return None
    return LocalApiServer(found, project.names.prefixed("apiserver"), project.namespace)


def local_apiserver_objects(served: LocalApiServer, *, port: int, ca: bytes) -> list[dict[str, Any]]:
    """The Service (ExternalName 127.0.0.1, ``port``) and the APIService (caBundle ``ca``) that
    put a server on this machine behind the cluster's kube-apiserver, labelled as ours."""
    service, apiservice = apiserver_manifests(
        served.kinds,
        name=served.service,
        namespace=served.namespace,
        service_account=served.service,
        port=port,
        ca_bundle=ca,
    )[:2]
    service["spec"] = {
        "type": "ExternalName",
        "externalName": "127.0.0.1",
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    }
    for obj in (service, apiservice):
        obj["metadata"]["labels"] = {MANAGED_BY: OURS}
    return [service, apiservice]


async def serving_accesses(client: Client, served: LocalApiServer) -> list[Access]:
    """What serving ``served`` from here asks of the client's identity (``kubeop run``'s
    permission check): to register and unregister its Service and APIService (get, create and
    patch, as a server-side apply that creates does, delete), its namespace (get; create when
    missing), and what every aggregated API server does (create TokenReviews and
    SubjectAccessReviews, get ``kube-system/extension-apiserver-authentication``)."""
    wanted: list[Access] = []
    for obj in local_apiserver_objects(served, port=0, ca=b""):
        resource, name, namespace = _where(obj)
        wanted += [
            Access(verb, resource.group, resource.plural, name=name, namespace=namespace or "")
            for verb in ("get", "create", "patch", "delete")
        ]
    wanted.append(Access("get", "", _NAMESPACES.plural, name=served.namespace))
    try:
        if await client.get_or_none(_NAMESPACES, served.namespace) is None:
            wanted.append(Access("create", "", _NAMESPACES.plural))
    except Forbidden:  # may not even look: the get above is denied, and named
        pass
    return [
        *wanted,
        Access("create", "authentication.k8s.io", "tokenreviews"),
        Access("create", "authorization.k8s.io", "subjectaccessreviews"),
        Access("get", "", "configmaps", name=CONFIGMAP_NAME, namespace=CONFIGMAP_NAMESPACE),
    ]


def _where(obj: Mapping[str, Any]) -> tuple[ApiResource, str, str | None]:
    meta = obj["metadata"]
    return _RESOURCES[obj["kind"]], meta["name"], meta.get("namespace")


def _is_ours(current: Mapping[str, Any]) -> bool:
    return ((current.get("metadata") or {}).get("labels") or {}).get(MANAGED_BY) == OURS


async def _refuse_foreign(client: Client, objs: Sequence[Mapping[str, Any]]) -> None:
    for obj in objs:
        resource, name, namespace = _where(obj)
        current = await client.get_or_none(resource, name, namespace=namespace)
        if current is not None and not _is_ours(current):
            where = f" in namespace {namespace}" if namespace else ""
            raise ForeignObject(
                f"the cluster has {obj['kind']} {name}{where} already and kubeop run did not make it "
                f"(no label {MANAGED_BY}={OURS}): the aggregated API is served from elsewhere. "
                f"Delete it ({_delete_command(obj)}) to serve it from here, or run with --no-apiserver"
            )


async def register(client: Client, objs: Sequence[Mapping[str, Any]]) -> None:
    """Apply the Service and APIService (creating their namespace if missing); refuses with
    :class:`ForeignObject` when either exists without our label."""
    await _refuse_foreign(client, objs)
    for namespace in sorted({o["metadata"]["namespace"] for o in objs if o["metadata"].get("namespace")}):
        if await client.get_or_none(_NAMESPACES, namespace) is None:
            ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            await client.create(ns, resource=_NAMESPACES)
            say(f"created Namespace {namespace}")
    for obj in objs:
        await client.apply(dict(obj), field_manager=FIELD_MANAGER, force=True)
        say(f"applied {obj['kind']} {obj['metadata']['name']}")


async def unregister(client: Client, objs: Sequence[Mapping[str, Any]]) -> None:
    """Delete what :func:`register` applied, the APIService first; only objects still ours."""
    for obj in reversed(objs):
        resource, name, namespace = _where(obj)
        try:
            current = await client.get_or_none(resource, name, namespace=namespace)
            if current is None or not _is_ours(current):
                continue
            await client.delete(resource, name, namespace=namespace)
        except NotFound:
            continue
        except Exception as exc:  # cleanup goes on; the user is told what is left
            say(f"could not delete {obj['kind']} {name} ({exc}): delete it with {_delete_command(obj)}")
            continue
        say(f"deleted {obj['kind']} {name}")


def _delete_command(obj: Mapping[str, Any]) -> str:
    resource, name, namespace = _where(obj)
    return f"kubectl delete {resource.plural} {name}" + (f" -n {namespace}" if namespace else "")


async def _operator(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Run the operator until it exits; SIGINT/SIGTERM to this process go to it (it runs in a
    process group of its own, so a terminal's Ctrl-C reaches it once, from here)."""
    child = await asyncio.create_subprocess_exec(*command, env=dict(env), process_group=0)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def forward(sig: signal.Signals) -> None:
        stopping.set()
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, forward, sig)
    try:
        exited = asyncio.ensure_future(child.wait())
        signalled = asyncio.ensure_future(stopping.wait())
        await asyncio.wait([exited, signalled], return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        try:
            code = await asyncio.wait_for(asyncio.shield(exited), _STOP_GRACE)
        except TimeoutError:
            say(f"the operator did not exit within {_STOP_GRACE:.0f} s of the signal: killing it")
            with contextlib.suppress(ProcessLookupError):
                child.kill()
            code = await exited
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    return code if code >= 0 else 128 - code


async def serve_with_operator(
    served: LocalApiServer,
    *,
    kubeconfig: Path | None,
    sqlite: str | None,
    command: Sequence[str],
    env: Mapping[str, str],
    starting: str = "starting the operator",
) -> int:
    """Serve the aggregated API here, registered with the cluster, while the operator
    (``command``, announced by the line ``starting``) runs; unregister when it exits. Returns
    the operator's exit code."""
    with tempfile.TemporaryDirectory(prefix="kubeop-apiserver-") as certs:
        ca = local_certificates(certs, hosts=served.hosts).ca_pem
        storage: Storage = SQLiteStorage(sqlite) if sqlite else MemoryStorage()
        server = APIServer(served.kinds, storage, address="127.0.0.1:0", cert_dir=certs)
        async with connect(kubeconfig, None) as client:
            await _refuse_foreign(client, local_apiserver_objects(served, port=0, ca=ca))
            await server.start(client)
            objs = local_apiserver_objects(served, port=server.port, ca=ca)
            try:
                await register(client, objs)
                plurals = ", ".join(r.decl.plural for r in server.resources)
                say(
                    f"serving {server.group}/{server.version} ({plurals}) on {server.url}, behind the "
                    f"cluster's API server as APIService {server.version}.{server.group}"
                )
                say(starting)
                return await _operator(command, env)
            finally:
                await unregister(client, objs)
                await server.stop()
