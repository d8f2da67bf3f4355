"""The Helm engine: the real ``helm`` binary, run as asyncio subprocesses.

Templates are rendered and releases installed, upgraded, rolled back and uninstalled by Helm
itself, so charts behave exactly as with ``helm`` on a terminal and releases are stored the way
Helm stores them (``helm list`` / ``helm status`` / ``helm history`` see them). Each call is one
``helm`` process, started with ``asyncio.create_subprocess_exec`` (the event loop never blocks),
and at most ``max_concurrent`` of them run at once, whatever the number of reconcile workers.

Isolation: every process gets its own Helm home (cache, config, data) in a private temporary
directory, so a user's repositories and plugins are never used and nothing is fetched; the
Secret storage driver; and an explicit ``--kubeconfig`` with the operator's own credentials
(written from its client configuration, 0600, removed by :meth:`Helm.close`). Values go to Helm
on stdin (``-f -``), never on a command line.

:func:`find_helm` looks for the binary: an explicit path, ``$KUBEOP_HELM``, the pinned build in
kubeop's cache (``kubeop cluster build --helm``), then ``helm`` on PATH.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeop import binaries
from kubeop.client import ClientConfig
from kubeop.helm.releases import Release, release_from_json

__all__ = ["Helm", "HelmError", "HelmNotFound", "HelmStats", "find_helm", "write_kubeconfig"]

log = logging.getLogger("kubeop.helm")

POSTRENDER_SCRIPT = Path(__file__).with_name("postrender.py")


class HelmNotFound(RuntimeError):
    """No helm binary; the message says how to get one."""


class HelmError(RuntimeError):
    """A helm command failed. ``message`` is Helm's own error text (``INSTALLATION FAILED: ...``)."""

    def __init__(self, command: str, message: str, returncode: int) -> None:
        super().__init__(message)
        self.command = command
        self.message = message
        self.returncode = returncode

    @property
    def not_found(self) -> bool:
        """The release does not exist (``release: not found``)."""
        return "not found" in self.message and "release" in self.message


@dataclass
class HelmStats:
    """How many helm processes ran, by operation, and their total wall time."""

    calls: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, op: str, ok: bool, seconds: float) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        if not ok:
            self.failures[op] = self.failures.get(op, 0) + 1
        self.seconds += seconds

    @property
    def total(self) -> int:
        return sum(self.calls.values())


def find_helm(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The helm binary to use (see the module docstring for the search order)."""
    try:
        return binaries.find_helm(explicit)
    except FileNotFoundError as e:
        raise HelmNotFound(str(e)) from None


def write_kubeconfig(config: ClientConfig, path: str | os.PathLike[str]) -> None:
    """Write ``config`` as a one-context kubeconfig file (mode 0600) that Helm can use."""
    cluster: dict[str, Any] = {"server": config.server}
    if config.ca_data:
        cluster["certificate-authority-data"] = base64.b64encode(config.ca_data).decode()
    elif config.ca_file:
        cluster["certificate-authority"] = config.ca_file
    if config.insecure_skip_tls_verify:
        cluster["insecure-skip-tls-verify"] = True
    if config.tls_server_name:
        cluster["tls-server-name"] = config.tls_server_name
    if config.proxy_url:
        cluster["proxy-url"] = config.proxy_url
    user: dict[str, Any] = {}
    if config.client_cert_data:
        user["client-certificate-data"] = base64.b64encode(config.client_cert_data).decode()
    elif config.client_cert_file:
        user["client-certificate"] = config.client_cert_file
    if config.client_key_data:
        user["client-key-data"] = base64.b64encode(config.client_key_data).decode()
    elif config.client_key_file:
        user["client-key"] = config.client_key_file
    if config.token:
        user["token"] = config.token
    elif config.token_file:
        user["tokenFile"] = config.token_file
    if config.username:
        user["username"] = config.username
        user["password"] = config.password or ""
    if config.exec is not None:
        ex = config.exec
        user["exec"] = {
            "apiVersion": ex.api_version,
            "command": ex.command,
            "args": list(ex.args),
            "env": [{"name": k, "value": v} for k, v in ex.env.items()] or None,
            "provideClusterInfo": ex.provide_cluster_info,
            "interactiveMode": "Never",
        }
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "operator", "cluster": cluster}],
        "users": [{"name": "operator", "user": user}],
        "contexts": [
            {
                "name": "operator",
                "context": {"cluster": "operator", "user": "operator", "namespace": config.namespace},
            }
        ],
        "current-context": "operator",
    }
    p = Path(path)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)


class Helm:
    """Runs helm commands for one cluster (see the module docstring).

    Args:
        binary: the helm executable (default: :func:`find_helm`).
        kubeconfig: a kubeconfig path to hand to Helm; or give ``config`` and one is written
            from it (the operator's own credentials).
        max_concurrent: helm processes at most at once (default: the number of CPUs).
        timeout: seconds one helm process may run before it is terminated (and fails).
        openapi_validation: let Helm validate rendered objects against the server's OpenAPI
            schema before installing or upgrading (Helm's default; it costs ~0.2 s of CPU per
            call). Dry runs never validate: they only compute the manifest.
        history_max: revisions kept per release (Helm's ``--history-max``).
    """

    def __init__(
        self,
        binary: str | os.PathLike[str] | None = None,
        *,
        kubeconfig: str | os.PathLike[str] | None = None,
        config: ClientConfig | None = None,
        max_concurrent: int | None = None,
        timeout: float = 600.0,
        openapi_validation: bool = True,
        history_max: int = 10,
    ) -> None:
        self.binary = find_helm(binary)
        self.timeout = timeout
        self.openapi_validation = openapi_validation
        self.history_max = history_max
        self.max_concurrent = max_concurrent or os.cpu_count() or 2
        self._sem = asyncio.Semaphore(self.max_concurrent)
        self._home = Path(tempfile.mkdtemp(prefix="kubeop-helm-"))
        self._home.chmod(0o700)
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(self._home), True)
        if kubeconfig is not None:
            self.kubeconfig = str(kubeconfig)
        elif config is not None:
            self.kubeconfig = str(self._home / "kubeconfig")
            write_kubeconfig(config, self.kubeconfig)
        else:
            raise ValueError("Helm needs a kubeconfig path or a ClientConfig to write one from")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HELM_", "KUBECONFIG"))}
        env.update(
            HELM_CACHE_HOME=str(self._home / "cache"),
            HELM_CONFIG_HOME=str(self._home / "config"),
            HELM_DATA_HOME=str(self._home / "data"),
            HELM_DRIVER="secret",
        )
        self._env = env
        self.stats = HelmStats()

    def close(self) -> None:
        """Remove the private Helm home (and the kubeconfig written there); also done when the
        engine is garbage-collected or the process exits."""
        self._cleanup()

    # -- operations -----------------------------------------------------------------------------

    async def install(
        self,
        name: str,
        namespace: str,
        chart: str | os.PathLike[str],
        values: Mapping[str, Any],
        *,
        post_renderer: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Release:
        """``helm install`` (no ``--wait``); returns the installed release. ``labels`` are stored
        with the release (``--labels``; its ``labels`` field stays empty: Helm does not print them)."""
        args = ["install", name, str(chart), "--namespace", namespace, "--values", "-", "--output", "json"]
        if not self.openapi_validation:
            args.append("--disable-openapi-validation")
        args += _labels_args(labels)
        args += self._post_renderer_args(post_renderer)
        out = await self._run("install", args, stdin=_values_bytes(values))
        return release_from_json(json.loads(out))

    async def upgrade(
        self,
        name: str,
        namespace: str,
        chart: str | os.PathLike[str],
        values: Mapping[str, Any],
        *,
        force: bool = False,
        dry_run: bool = False,
        post_renderer: str | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Release:
        """``helm upgrade`` with exactly ``values`` (``--reset-values``: nothing is reused from the
        last release). ``dry_run`` renders against the cluster (``--dry-run=server``, so ``lookup``
        works as in a real upgrade) and changes nothing; it skips OpenAPI validation. ``labels``
        are merged into the release's labels (Helm keeps the ones not given)."""
        args = ["upgrade", name, str(chart), "--namespace", namespace, "--values", "-", "--reset-values"]
        args += ["--output", "json", f"--history-max={self.history_max}"]
        if dry_run:
            args += ["--dry-run=server", "--disable-openapi-validation"]
        elif not self.openapi_validation:
            args.append("--disable-openapi-validation")
        if force:
            args.append("--force")
        args += _labels_args(labels)
        args += self._post_renderer_args(post_renderer)
        out = await self._run("dry-run" if dry_run else "upgrade", args, stdin=_values_bytes(values))
        return release_from_json(json.loads(out))

    async def rollback(self, name: str, namespace: str, revision: int, *, force: bool = False) -> None:
        """``helm rollback`` to ``revision`` (``force``: replace objects that cannot be patched)."""
        args = [
            "rollback",
            name,
            str(revision),
            "--namespace",
            namespace,
            f"--history-max={self.history_max}",
        ]
        if force:
            args.append("--force")
        await self._run("rollback", args)

    async def uninstall(self, name: str, namespace: str, *, wait: bool = False) -> None:
        """``helm uninstall`` (a missing release is not an error)."""
        args = ["uninstall", name, "--namespace", namespace, "--ignore-not-found"]
        if wait:
            args.append("--wait")
        await self._run("uninstall", args)

    async def version(self) -> str:
        """The helm binary's version (``helm version --short``)."""
        return (await self._run("version", ["version", "--short"], cluster=False)).strip()

    # -- running --------------------------------------------------------------------------------

    @staticmethod
    def _post_renderer_args(spec: str | None) -> list[str]:
        if spec is None:
            return []
        # -P: do not put the script's directory (kubeop/helm) first on sys.path.
        return [
            f"--post-renderer={sys.executable}",
            "--post-renderer-args=-P",
            f"--post-renderer-args={POSTRENDER_SCRIPT}",
            f"--post-renderer-args={spec}",
        ]

    async def _run(
        self, op: str, args: Sequence[str], *, stdin: bytes | None = None, cluster: bool = True
    ) -> str:
        argv = [str(self.binary), *args]
        if cluster:
            argv += ["--kubeconfig", self.kubeconfig]
        async with self._sem:
            started = time.monotonic()
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
            )
            try:
                out, err = await asyncio.wait_for(proc.communicate(stdin), self.timeout)
            except TimeoutError:
                await _stop(proc)
                self.stats.count(op, False, time.monotonic() - started)
                raise HelmError(op, f"helm {args[0]} timed out after {self.timeout:.0f} s", -1) from None
            except BaseException:  # cancelled: the process must not outlive the reconcile
                await _stop(proc)
                self.stats.count(op, False, time.monotonic() - started)
                raise
            elapsed = time.monotonic() - started
        ok = proc.returncode == 0
        self.stats.count(op, ok, elapsed)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("helm %s: exit %s in %.3f s", " ".join(args[:3]), proc.returncode, elapsed)
        if not ok:
            raise HelmError(op, _error_text(err.decode(errors="replace")), proc.returncode or -1)
        return out.decode()


async def _stop(proc: asyncio.subprocess.Process) -> None:
    """Terminate a helm process that must not outlive its caller (cancelled or timed out)."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 5)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


def _labels_args(labels: Mapping[str, str] | None) -> list[str]:
    """``--labels k=v,...``; Helm splits the flag on "," and "=", so neither may occur inside."""
    if not labels:
        return []
    for key, value in labels.items():
        if not key or any(c in key or c in value for c in ",=") or not (key + value).isprintable():
            raise ValueError(f"release label {key}={value!r} cannot be passed to helm --labels")
    return ["--labels", ",".join(f"{k}={v}" for k, v in sorted(labels.items()))]


def _values_bytes(values: Mapping[str, Any]) -> bytes:
    # JSON is YAML: exact types (no YAML 1.1 surprises), one line, parsed by Helm as a values file.
    return json.dumps(values, separators=(",", ":")).encode()


def _error_text(stderr: str) -> str:
    """Helm's error message without its ``Error: `` prefix, warnings and debug lines."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for i, line in enumerate(lines):
        if line.startswith("Error: "):
            return "\n".join([line[len("Error: ") :], *lines[i + 1 :]]).strip()
    kept = [ln for ln in lines if not ln.startswith("WARNING:")]
    return "\n".join(kept).strip() or "helm failed without a message"
