"""The fleet an operator process is told to run by its environment (``kubeop run --kubeconfig a
--kubeconfig b`` / ``--cluster-secret-selector``): a Manager started with these variables set
runs its controllers as a :class:`~kubeop.fleet.Fleet` instead of on its one cluster.

``KUBEOP_FLEET_KUBECONFIGS``: ``name=path`` entries separated by ``os.pathsep`` (a cluster per
kubeconfig file, its current context). ``KUBEOP_FLEET_SECRET_SELECTOR``: a label selector of
kubeconfig Secrets in the hub (the cluster of ``$KUBECONFIG``), in the namespace
``KUBEOP_FLEET_SECRET_NAMESPACE`` (default ``default``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from kubeop.core.selectors import LabelSelector, SelectorError
from kubeop.fleet._member import PerCluster
from kubeop.fleet._names import check_cluster_name
from kubeop.fleet.fleet import Fleet
from kubeop.fleet.provider import ClusterProvider, Kubeconfigs
from kubeop.fleet.secrets import KubeconfigSecrets

if TYPE_CHECKING:
    from kubeop.manager import Manager

__all__ = [
    "KUBECONFIGS_ENV",
    "SECRET_NAMESPACE_ENV",
    "SECRET_SELECTOR_ENV",
    "fleet_for",
    "parse_kubeconfigs",
    "providers_from",
]

KUBECONFIGS_ENV = "KUBEOP_FLEET_KUBECONFIGS"
SECRET_SELECTOR_ENV = "KUBEOP_FLEET_SECRET_SELECTOR"
SECRET_NAMESPACE_ENV = "KUBEOP_FLEET_SECRET_NAMESPACE"


def _cluster_name_of(path: str) -> str:
    """A cluster's default name: its kubeconfig file's name without the extension, lower case,
    anything but letters, digits, '-' and '.' made '-'."""
    stem = Path(path).name.split(".", 1)[0].lower()
    return "".join(c if c.isalnum() or c in "-." else "-" for c in stem).strip("-.") or "cluster"


def parse_kubeconfigs(entries: list[str], *, where: str) -> dict[str, str]:
    """``name=path`` or ``path`` entries -> {cluster name: path}; ValueError naming the entry
    when a file is missing, a name is not DNS-1123, or two clusters share a name."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, path = entry.partition("=")
        if not sep:
            name, path = _cluster_name_of(entry), entry
        check_cluster_name(name, where=f"{where} {entry!r}")
        if not Path(path).is_file():
            raise ValueError(f"{where} {path!r}: no such kubeconfig file")
        if name in out:
            raise ValueError(
                f"{where}: two kubeconfigs name cluster {name!r} ({out[name]!r} and {path!r}); "
                "name them: NAME=PATH"
            )
        out[name] = path
    return out


def check_selector(selector: str, *, where: str) -> str:
    """``selector`` if it parses as a label selector; else ValueError naming ``where``."""
    try:
        LabelSelector.parse(selector)
    except SelectorError as exc:
        raise ValueError(f"{where} {selector!r} is not a label selector: {exc}") from None
    if not selector.strip():
        raise ValueError(f"{where} is empty: give a label selector, e.g. cluster.x-k8s.io/cluster-name")
    return selector


def providers_from(environ: Mapping[str, str]) -> list[ClusterProvider]:
    """The cluster providers the environment asks for (none: run on one cluster as ever)."""
    providers: list[ClusterProvider] = []
    entries = [e for e in environ.get(KUBECONFIGS_ENV, "").split(os.pathsep) if e]
    if entries:
        providers.append(Kubeconfigs(parse_kubeconfigs(entries, where=KUBECONFIGS_ENV)))
    selector = environ.get(SECRET_SELECTOR_ENV)
    if selector is not None:
        providers.append(
            KubeconfigSecrets(
                environ.get(SECRET_NAMESPACE_ENV) or "default",
                label_selector=check_selector(selector, where=SECRET_SELECTOR_ENV),
            )
        )
    return providers


def fleet_for(manager: Manager, environ: Mapping[str, str] | None = None) -> Fleet | None:
    """The Fleet running ``manager``'s controllers on the clusters the environment names (None
    when it names none). Raises ValueError for what a fleet cannot run yet (other runnables,
    webhooks, leader election, sharding between replicas, a dashboard), naming it."""
    providers = providers_from(os.environ if environ is None else environ)
    if not providers:
        return None
    per_cluster = [r for r in manager.runnables if isinstance(r, PerCluster)]
    refused = [
        what
        for what, present in (
            ("runnables other than controllers", len(per_cluster) < len(manager.runnables)),
            ("webhooks", bool(manager.webhooks)),
            ("leader election", manager.election is not None),
            ("sharding", manager.sharding is not None),
            ("a dashboard", manager.dashboard is not None),
        )
        if present
    ]
    if refused:
        raise ValueError(
            f"this operator has {', '.join(refused)}, which a fleet run (several clusters: "
            f"{KUBECONFIGS_ENV} / {SECRET_SELECTOR_ENV}, set by kubeop run --kubeconfig a --kubeconfig b "
            "or --cluster-secret-selector) does not run yet: run it on one cluster, or without them"
        )
    fleet = Fleet(
        *providers,
        name=manager.name,
        runtime=manager.runtime,
        clock=manager.clock,
        metrics_address=manager.serving.metrics_address,
    )
    for controller in manager.controllers:
        fleet.add(controller)
    for item in per_cluster:  # what runs once per cluster (kopf's event handlers, indices)
        fleet.add(item)
    return fleet
