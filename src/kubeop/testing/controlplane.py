"""A real local Kubernetes control plane: etcd + kube-apiserver (+ controller-manager, scheduler
and KWOK fake nodes), started on loopback ports from binaries built by :mod:`kubeop.testing.binaries`.

Two lifetimes:

* ephemeral (tests, demos): ``with ControlPlane() as cp:`` starts in a temporary directory; a
  reaper process kills everything and removes the directory even if the owner is SIGKILLed;
* persistent (``kubeop cluster up``): ``ControlPlane(data_dir, persistent=True)`` writes its
  state next to its data, survives the CLI process, and :meth:`ControlPlane.attach` finds it again.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from kubeop.testing._api import AdminAPI, ApiCallError
from kubeop.testing.binaries import Binaries, ensure_binaries, locate_binaries
from kubeop.testing.pki import CertificateAuthority, CertPair, service_account_keys
from kubeop.testing.process import Process, Reaper, pid_alive, terminate_group

HOST = "127.0.0.1"
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.244.0.0/16"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# Used only where kube-apiserver insists on a non-loopback advertise address and the machine has
# no default route (TEST-NET-1, RFC 5737: never routed; with the endpoint reconciler off nothing
# ever dials it).
FALLBACK_ADVERTISE_ADDRESS = "192.0.2.1"
# The common name of the client certificate kube-apiserver proxies to aggregated API servers with.
FRONT_PROXY_CLIENT = "front-proxy-client"
#: The full cluster's default StorageClass. Its volumes are hostPath directories under
#: ``<data_dir>/volumes`` (the class's ``path`` parameter), created by a provisioner that watches
#: for claims naming ``HOSTPATH_PROVISIONER`` (``examples/hostpath_provisioner``, a kubeop
#: operator; nothing in the control plane itself provisions).
DEFAULT_STORAGE_CLASS = "standard"
HOSTPATH_PROVISIONER = "kubeop.dev/hostpath"

Progress = Callable[[str], None]


class ControlPlaneError(RuntimeError):
    """The control plane could not be started or used; the message names the cause and the fix."""


def crd_documents(crds: Iterable[str | os.PathLike[str] | Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The CRDs ``install_crds`` was given: dicts as they are, files (YAML or JSON, several
    documents each) read; anything but a CustomResourceDefinition is a ControlPlaneError."""
    objects: list[Mapping[str, Any]] = []
    for item in crds:
        if isinstance(item, Mapping):
            objects.append(item)
        else:
            objects.extend(d for d in yaml.safe_load_all(Path(item).read_text()) if d)
    for obj in objects:
        if obj.get("kind") != "CustomResourceDefinition":
            raise ControlPlaneError(f"install_crds got a {obj.get('kind')!r}, not a CustomResourceDefinition")
    return objects


def _quiet(_: str) -> None:
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int) -> bool:
    """True when something listens on ``HOST:port`` (TIME_WAIT leftovers do not count: the
    components set SO_REUSEADDR, as this check does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return True
    return False


def has_default_route(route_table: str = "/proc/net/route") -> bool:
    """True when the IPv4 routing table has a default route (destination 00000000)."""
    try:
        lines = Path(route_table).read_text().splitlines()[1:]
    except OSError:
        return True  # not Linux, or unreadable: let kube-apiserver decide as usual
    return any(line.split()[1:2] == ["00000000"] for line in lines if line.strip())


def apiserver_args(
    *,
    etcd_url: str,
    port: int,
    pki: Path,
    default_route: bool,
    service_account_admission: bool,
    extra: Sequence[str] = (),
) -> list[str]:
    """kube-apiserver flags for a loopback-only, RBAC-enforcing local server.

    The endpoint reconciler is always off: it would publish the advertise address as the
    ``kubernetes`` Service endpoint, which nothing in a loopback cluster can reach anyway. Without a
    default route kube-apiserver cannot pick an advertise address by itself and refuses
    127.0.0.1, so one is given explicitly.
    """
    args = [
        f"--etcd-servers={etcd_url}",
        f"--bind-address={HOST}",
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--authorization-mode=RBAC",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--endpoint-reconciler-type=none",
        "--profiling=false",
        # the aggregation layer: kube-apiserver proxies to extension API servers with this client
        # certificate, which they verify against the requestheader CA before trusting the
        # X-Remote-* headers (no --enable-aggregator-routing: with it an APIService needs
        # Endpoints, which may not be loopback addresses; without it an ExternalName Service
        # naming 127.0.0.1 reaches a server on this machine)
        f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
        f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
    ]
    if not default_route:
        args.append(f"--advertise-address={FALLBACK_ADVERTISE_ADDRESS}")
    if not service_account_admission:
        # Without kube-controller-manager nobody creates the "default" ServiceAccount that the
        # admission plugin demands of every Pod.
        args.append("--disable-admission-plugins=ServiceAccount")
    args.extend(extra)
    return args


def kubeconfig_dict(
    server: str, ca: Path, cert: Path | None, key: Path | None, user: str, token: str | None = None
) -> dict[str, Any]:
    auth: dict[str, str] = {}
    if cert is not None and key is not None:
        auth = {"client-certificate": str(cert), "client-key": str(key)}
    if token is not None:
        auth = {"token": token}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kubeop-local", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": auth}],
        "contexts": [{"name": "kubeop-local", "context": {"cluster": "kubeop-local", "user": user}}],
        "current-context": "kubeop-local",
        "preferences": {},
    }


def node_manifest(name: str) -> dict[str, Any]:
    """A v1.Node that KWOK adopts (by annotation) and keeps Ready with lease heartbeats."""
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubeop.dev/fake-node": "kwok",
                "type": "kwok",
            },
        },
        "spec": {},
        "status": {"allocatable": resources, "capacity": resources},
    }


class ControlPlane:
    """etcd + kube-apiserver, optionally kube-controller-manager, kube-scheduler and KWOK nodes.

    ``full=False`` is the fast "apiserver + etcd" mode (what envtest gives). ``full=True`` adds the
    garbage collector, workload controllers, scheduler and ``nodes`` fake nodes, so Deployments get
    Running pods.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        full: bool = True,
        nodes: int = 2,
        apiserver_port: int | None = None,
        persistent: bool = False,
        binaries: Binaries | None = None,
        build: bool = True,
        extra_apiserver_args: Sequence[str] = (),
        progress: Progress | None = None,
        start_timeout: float = 90.0,
    ) -> None:
        self.full = full
        self.node_count = nodes if full else 0
        self.persistent = persistent
        self._ephemeral_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="kubeop-cp-"))
        )
        self._binaries = binaries
        self._build = build
        self._extra_apiserver_args = tuple(extra_apiserver_args)
        self._progress = progress or _quiet
        self._timeout = start_timeout
        self._requested_port = apiserver_port
        self.ports: dict[str, int] = {}
        self._procs: dict[str, Process] = {}
        self._reaper: Reaper | None = None
        self._api: AdminAPI | None = None
        self.started_at: float | None = None

    # -- paths ---------------------------------------------------------------------------------
    @property
    def pki_dir(self) -> Path:
        """Where the control plane's CA, serving and client certificates are written."""
        return self.data_dir / "pki"

    @property
    def log_dir(self) -> Path:
        """Where each component's log is written (one file per component)."""
        return self.data_dir / "logs"

    @property
    def kubeconfig_path(self) -> str:
        """Admin kubeconfig (user ``kubeop-admin`` in group ``system:masters``)."""
        return str(self.data_dir / "kubeconfig")

    @property
    def ca_file(self) -> str:
        """The CA certificate that signed the API server's serving certificate."""
        return str(self.pki_dir / "ca.crt")

    @property
    def server(self) -> str:
        """The API server's URL (``https://127.0.0.1:<port>``)."""
        return f"https://{HOST}:{self.ports['apiserver']}"

    @property
    def state_file(self) -> Path:
        """The file recording the running components (ports, process ids), which :meth:`attach` reads."""
        return self.data_dir / "state.json"

    @property
    def binaries(self) -> Binaries:
        """The binaries the control plane runs: built once when missing (unless ``build=False``, which only
        looks them up).
        """
        if self._binaries is None:
            self._binaries = (
                ensure_binaries(progress=self._progress, full=self.full)
                if self._build
                else locate_binaries(full=self.full)
            )
        return self._binaries

    @property
    def api(self) -> AdminAPI:
        """A stdlib HTTPS caller authenticated as the admin (for bootstrap work and tests)."""
        if self._api is None:
            self._api = AdminAPI(
                HOST,
                self.ports["apiserver"],
                ca_file=self.ca_file,
                cert_file=str(self.pki_dir / "admin.crt"),
                key_file=str(self.pki_dir / "admin.key"),
            )
        return self._api

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start the components and wait until the API server is ready (and, in full mode, the nodes); returns
        the control plane. Raises ControlPlaneError naming the component that failed and its log.
        """
        t0 = time.monotonic()
        binaries = self.binaries
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._pick_ports()
        self._write_pki()
        if not self.persistent:
            self._reaper = Reaper(
                self.data_dir / "reaper.pids", cleanup_dir=self.data_dir if self._ephemeral_dir else None
            )
            self._reaper.watch([])
            self._reaper.start()
        try:
            self._start_etcd(binaries)
            self._start_apiserver(binaries)
            self._wait(lambda: self.api.ok("/readyz"), "kube-apiserver /readyz", ["etcd", "kube-apiserver"])
            self._progress(f"  kube-apiserver ready at {self.server} ({time.monotonic() - t0:.1f} s)")
            if self.full:
                self._start_full(binaries)
                self._progress(f"  {self.node_count} KWOK nodes Ready ({time.monotonic() - t0:.1f} s)")
        except BaseException:
            self.stop()
            raise
        self.started_at = time.time()
        self._save_state()
        return self

    def _pick_ports(self) -> None:
        if self._requested_port is not None and port_in_use(self._requested_port):
            raise ControlPlaneError(
                f"port {self._requested_port} on {HOST} is already in use; pick another API server port "
                "(e.g. `kubeop cluster up --port 0` for a free one) or stop what listens there"
            )
        names = ["etcd", "etcd-peer", "apiserver"] + (
            ["controller-manager", "scheduler"] if self.full else []
        )
        previous = dict(self.ports)
        self.ports = {}
        for name in names:
            port = previous.get(name)
            if name == "apiserver" and self._requested_port:
                port = self._requested_port
            if port is None or port_in_use(port) or port in self.ports.values():
                port = free_port()
                while port in self.ports.values():
                    port = free_port()
            self.ports[name] = port

    def _write_pki(self) -> None:
        pki = self.pki_dir
        if not (pki / "front-proxy-client.crt").exists():  # also for clusters made before it
            front_proxy = CertificateAuthority.create("kubeop-front-proxy-ca")
            front_proxy.save(pki, "front-proxy-ca")
            front_proxy.issue_to(pki, "front-proxy-client", FRONT_PROXY_CLIENT, client=True)
        ca_pair = CertPair(pki / "ca.crt", pki / "ca.key")
        if ca_pair.cert.exists() and ca_pair.key.exists() and (pki / "admin.crt").exists():
            return  # persistent cluster restarted: keep its identity so kubeconfigs stay valid
        ca = CertificateAuthority.create()
        ca.save(pki)
        ca.issue_to(
            pki,
            "apiserver",
            "kube-apiserver",
            hosts=[
                HOST,
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "10.96.0.1",
            ],
            server=True,
        )
        ca.issue_to(pki, "admin", "kubeop-admin", organizations=["system:masters"], client=True)
        ca.issue_to(pki, "controller-manager", "system:kube-controller-manager", client=True)
        ca.issue_to(pki, "scheduler", "system:kube-scheduler", client=True)
        service_account_keys(pki)

    def _write_kubeconfig(self, path: Path, pair_name: str, user: str) -> Path:
        cfg = kubeconfig_dict(
            self.server,
            Path(self.ca_file),
            self.pki_dir / f"{pair_name}.crt",
            self.pki_dir / f"{pair_name}.key",
            user,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        path.chmod(0o600)
        return path

    def _spawn(self, name: str, args: list[str]) -> None:
        proc = Process(name, args, self.log_dir / f"{name}.log")
        proc.start()
        self._procs[name] = proc
        if self._reaper is not None:
            self._reaper.watch([p.pid for p in self._procs.values() if p.pid is not None])

    def _start_etcd(self, binaries: Binaries) -> None:
        client = f"http://{HOST}:{self.ports['etcd']}"
        peer = f"http://{HOST}:{self.ports['etcd-peer']}"
        self._spawn(
            "etcd",
            [
                str(binaries.etcd),
                "--name=kubeop",
                f"--data-dir={self.data_dir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=kubeop={peer}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
                "--quota-backend-bytes=4294967296",
            ],
        )

    def _start_apiserver(self, binaries: Binaries) -> None:
        args = apiserver_args(
            etcd_url=f"http://{HOST}:{self.ports['etcd']}",
            port=self.ports["apiserver"],
            pki=self.pki_dir,
            default_route=has_default_route(),
            service_account_admission=self.full,
            extra=self._extra_apiserver_args,
        )
        self._spawn("kube-apiserver", [str(binaries.kube_apiserver), *args])
        self._write_kubeconfig(Path(self.kubeconfig_path), "admin", "kubeop-admin")

    def _start_full(self, binaries: Binaries) -> None:
        pki = self.pki_dir
        kcm_kc = self._write_kubeconfig(
            self.data_dir / "components" / "controller-manager.kubeconfig",
            "controller-manager",
            "system:kube-controller-manager",
        )
        sched_kc = self._write_kubeconfig(
            self.data_dir / "components" / "scheduler.kubeconfig", "scheduler", "system:kube-scheduler"
        )
        self._spawn(
            "kube-controller-manager",
            [
                str(binaries.kube_controller_manager),
                f"--kubeconfig={kcm_kc}",
                f"--authentication-kubeconfig={kcm_kc}",
                f"--authorization-kubeconfig={kcm_kc}",
                f"--bind-address={HOST}",
                f"--secure-port={self.ports['controller-manager']}",
                f"--cert-dir={pki / 'controller-manager-serving'}",
                "--leader-elect=false",
                "--controllers=*",
                "--use-service-account-credentials=true",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--cluster-cidr={POD_CIDR}",
                "--allocate-node-cidrs=false",
                "--profiling=false",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(binaries.kube_scheduler),
                f"--kubeconfig={sched_kc}",
                f"--authentication-kubeconfig={sched_kc}",
                f"--authorization-kubeconfig={sched_kc}",
                f"--bind-address={HOST}",
                f"--secure-port={self.ports['scheduler']}",
                f"--cert-dir={pki / 'scheduler-serving'}",
                "--leader-elect=false",
                "--profiling=false",
            ],
        )
        stages = sorted(str(p) for p in binaries.kwok_stages.glob("*.yaml"))
        self._spawn(
            "kwok",
            [
                str(binaries.kwok),
                f"--kubeconfig={self.kubeconfig_path}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
                f"--cidr={POD_CIDR}",
                f"--node-ip={HOST}",
                "--node-lease-duration-seconds=40",
                f"--config={','.join(stages)}",
            ],
        )
        for i in range(self.node_count):
            self.ensure_node(f"kwok-node-{i}")
        self._wait(self.nodes_ready, f"{self.node_count} KWOK nodes Ready", ["kwok"])
        self._wait(
            lambda: self.api.raw("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            "the default ServiceAccount (kube-controller-manager)",
            ["kube-controller-manager"],
        )
        health = AdminAPI(HOST, self.ports["scheduler"])
        self._wait(lambda: health.ok("/healthz"), "kube-scheduler /healthz", ["kube-scheduler"])
        health.close()
        self.ensure_storage_class()

    def ensure_storage_class(self) -> None:
        """Create the default StorageClass (no-op when it exists); see ``DEFAULT_STORAGE_CLASS``."""
        (self.data_dir / "volumes").mkdir(parents=True, exist_ok=True)
        sc = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": DEFAULT_STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": HOSTPATH_PROVISIONER,
            "parameters": {"path": str((self.data_dir / "volumes").resolve())},
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
        status, body = self.api.raw("POST", "/apis/storage.k8s.io/v1/storageclasses", sc)
        if status not in (201, 409):
            raise ControlPlaneError(
                f"creating StorageClass {DEFAULT_STORAGE_CLASS} failed: HTTP {status} {body[:300]!r}"
            )

    def ensure_node(self, name: str) -> None:
        """Create a KWOK fake node (no-op when it exists)."""
        status, body = self.api.raw("POST", "/api/v1/nodes", node_manifest(name))
        if status not in (201, 409):
            raise ControlPlaneError(f"creating node {name} failed: HTTP {status} {body[:300]!r}")

    def nodes_ready(self) -> bool:
        """Whether at least the expected number of nodes report Ready."""
        nodes = self.api.call("GET", "/api/v1/nodes")["items"]
        ready = 0
        for node in nodes:
            for cond in node.get("status", {}).get("conditions", []):
                if cond.get("type") == "Ready" and cond.get("status") == "True":
                    ready += 1
        return ready >= self.node_count

    def _wait(self, check: Callable[[], bool], what: str, procs: Sequence[str]) -> None:
        deadline = time.monotonic() + self._timeout
        delay = 0.05
        while True:
            for name in procs:
                proc = self._procs.get(name)
                if proc is not None and not proc.alive():
                    raise ControlPlaneError(
                        f"{name} exited (code {proc.exit_code()}) while waiting for {what}. "
                        f"Log {proc.log}:\n{proc.log_tail()}\n{self._hint(name, proc.log_tail())}"
                    )
            try:
                if check():
                    return
            except (OSError, ApiCallError):
                pass
            if time.monotonic() > deadline:
                tails = "\n".join(
                    f"--- {n} ({self._procs[n].log}):\n{self._procs[n].log_tail(10)}"
                    for n in procs
                    if n in self._procs
                )
                raise ControlPlaneError(f"timed out after {self._timeout:.0f} s waiting for {what}.\n{tails}")
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _hint(self, name: str, log: str) -> str:
        if "address already in use" in log:
            return "Hint: a port was taken by another process between picking and binding; start again."
        if name == "etcd" and ("corrupt" in log or "failed to" in log) and self.persistent:
            etcd_dir = self.data_dir / "etcd"
            return f"Hint: the etcd data in {etcd_dir} looks damaged; `kubeop cluster down` resets it."
        if "exec format error" in log or "permission denied" in log.lower():
            return "Hint: the binary looks corrupt; `kubeop cluster build --force` rebuilds it."
        return ""

    def stop(self) -> None:
        """Stop every component (consumers first, etcd last); idempotent."""
        if self._api is not None:
            self._api.close()
            self._api = None
        for name in ["kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]:
            proc = self._procs.pop(name, None)
            if proc is not None:
                proc.stop()
        if self._reaper is not None:
            self._reaper.stop()
            self._reaper = None
        if self.persistent:
            with contextlib.suppress(FileNotFoundError):
                self.state_file.unlink()
        elif self._ephemeral_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    # -- persistent clusters -------------------------------------------------------------------
    def _save_state(self) -> None:
        if not self.persistent:
            return
        state = {
            "full": self.full,
            "nodes": self.node_count,
            "ports": self.ports,
            "pids": {name: proc.pid for name, proc in self._procs.items()},
            "started_at": self.started_at,
        }
        self.state_file.write_text(json.dumps(state, indent=1))

    @classmethod
    def attach(cls, data_dir: str | os.PathLike[str]) -> ControlPlane | None:
        """The persistent cluster recorded in ``data_dir``, or None when there is no state."""
        directory = Path(data_dir)
        try:
            state = json.loads((directory / "state.json").read_text())
        except (OSError, ValueError):
            return None
        cp = cls(
            directory, full=state.get("full", True), nodes=state.get("nodes", 0), persistent=True, build=False
        )
        cp.ports = {k: int(v) for k, v in state.get("ports", {}).items()}
        cp.started_at = state.get("started_at")
        for name, pid in state.get("pids", {}).items():
            proc = Process(name, [], cp.log_dir / f"{name}.log")
            proc.pid = int(pid)
            cp._procs[name] = proc
        return cp

    def component_status(self) -> dict[str, bool]:
        """Each component's name and whether its process is alive."""
        return {name: proc.alive() for name, proc in self._procs.items()}

    def healthy(self) -> bool:
        """Whether every component is alive and the API server answers ``/readyz``."""
        return bool(self._procs) and all(self.component_status().values()) and self.api.ok("/readyz")

    def kill_leftovers(self) -> None:
        """Stop whatever is still running of a recorded (possibly half-dead) cluster."""
        for name in ["kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"]:
            proc = self._procs.pop(name, None)
            if (
                proc is not None
                and proc.pid is not None
                and pid_alive(proc.pid)
                and _is_ours(proc.pid, self.data_dir)
            ):
                terminate_group(proc.pid)

    # -- fault injection (for tests of watches and controllers) --------------------------------
    def stop_apiserver(self, *, kill: bool = True) -> None:
        """Kill (default) or gracefully stop kube-apiserver, keeping etcd and everything else."""
        proc = self._procs["kube-apiserver"]
        if kill and proc.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
        proc.stop(timeout=10.0)
        if self._api is not None:
            self._api.close()

    def start_apiserver(self, *, wait: bool = True) -> None:
        """Start kube-apiserver again on the same port (after :meth:`stop_apiserver`)."""
        self._start_apiserver(self.binaries)
        if wait:
            self._wait(lambda: self.api.ok("/readyz"), "kube-apiserver /readyz", ["kube-apiserver"])
        self._save_state()

    def etcd_revision(self) -> int:
        """etcd's current revision (every write to the cluster raises it)."""
        return int(self._etcd("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: now); watches from older RVs get 410."""
        rev = revision if revision is not None else self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": str(rev), "physical": True})
        return rev

    def _etcd(self, path: str, body: Mapping[str, Any]) -> Any:
        req = urllib.request.Request(
            f"http://{HOST}:{self.ports['etcd']}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    # -- users, objects, CRDs ------------------------------------------------------------------
    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: str | None = None,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this cluster (admin unless ``kubeconfig`` is given)."""
        cmd = [str(self.binaries.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig_path}", *args]
        res = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and res.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}"
            )
        return res

    def kubeconfig_for_user(self, name: str, groups: Iterable[str] = ()) -> str:
        """A kubeconfig for a certificate-authenticated user (no permissions unless RBAC grants some)."""
        ca = CertificateAuthority.load(CertPair(self.pki_dir / "ca.crt", self.pki_dir / "ca.key"))
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        ca.issue_to(self.pki_dir / "users", safe, name, organizations=list(groups), client=True)
        path = self.data_dir / "kubeconfigs" / f"user-{safe}.yaml"
        cfg = kubeconfig_dict(
            self.server,
            Path(self.ca_file),
            self.pki_dir / "users" / f"{safe}.crt",
            self.pki_dir / "users" / f"{safe}.key",
            name,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        return str(path)

    def kubeconfig_for_service_account(
        self, namespace: str, name: str, *, expiration_seconds: int = 3600
    ) -> str:
        """A kubeconfig holding a fresh token of ServiceAccount ``namespace/name`` (created if missing)."""
        sa_path = f"/api/v1/namespaces/{namespace}/serviceaccounts"
        status, _ = self.api.raw("POST", sa_path, {"metadata": {"name": name}})
        if status not in (201, 409):
            raise ControlPlaneError(f"creating ServiceAccount {namespace}/{name} failed: HTTP {status}")
        token = self.api.call(
            "POST",
            f"{sa_path}/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )["status"]["token"]
        path = self.data_dir / "kubeconfigs" / f"sa-{namespace}-{name}.yaml"
        cfg = kubeconfig_dict(
            self.server,
            Path(self.ca_file),
            None,
            None,
            f"system:serviceaccount:{namespace}:{name}",
            token=token,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        path.chmod(0o600)
        return str(path)

    def create_namespace(self, name: str) -> None:
        """Create a namespace."""
        self.api.call("POST", "/api/v1/namespaces", {"metadata": {"name": name}})

    def delete_namespace(self, name: str) -> None:
        """Delete a namespace (a missing one is fine); raises ControlPlaneError if the server refuses."""
        status, body = self.api.raw("DELETE", f"/api/v1/namespaces/{name}")
        if status not in (200, 202, 404):
            raise ControlPlaneError(f"deleting namespace {name} failed: HTTP {status} {body[:300]!r}")

    def install_crds(
        self, crds: Iterable[str | os.PathLike[str] | Mapping[str, Any]], timeout: float = 30.0
    ) -> list[str]:
        """Create or update CRDs (from YAML/JSON files or dicts) and wait until each is Established."""
        names = []
        base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
        for obj in crd_documents(crds):
            name = obj["metadata"]["name"]
            status, body = self.api.raw("POST", base, dict(obj))
            if status == 409:
                current = self.api.call("GET", f"{base}/{name}")
                updated = dict(obj)
                updated["metadata"] = dict(
                    obj["metadata"], resourceVersion=current["metadata"]["resourceVersion"]
                )
                self.api.call("PUT", f"{base}/{name}", updated)
            elif status >= 400:
                raise ControlPlaneError(
                    f"creating CRD {name} failed: HTTP {status} {body.decode(errors='replace')[:500]}"
                )
            names.append(name)
        deadline = time.monotonic() + timeout
        for name in names:
            while True:
                crd = self.api.call("GET", f"{base}/{name}")
                conds = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
                if conds.get("Established") == "True":
                    break
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} not Established after {timeout:.0f} s: {conds}")
                time.sleep(0.05)
        return names

    def env(self) -> dict[str, str]:
        """Environment for a subprocess that should talk to this cluster."""
        return dict(os.environ, KUBECONFIG=self.kubeconfig_path)


def _is_ours(pid: int, data_dir: Path) -> bool:
    """Only kill a recorded pid if its command line still points into our data dir (pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return str(data_dir) in cmdline
