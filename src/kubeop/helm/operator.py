"""HelmOperator: one controller per watches.yaml entry, sharing one Helm engine and one cache.

    operator = HelmOperator(load_watches("watches.yaml"))
    manager = Manager(name="php-operator")
    operator.add_to(manager)
    manager.run()                 # or: await manager.start(stop_event)

or, as operator-sdk's ``helm-operator run`` does: ``python -m kubeop.helm --watches-file
watches.yaml`` (:func:`run`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubeop.controller import Controller
from kubeop.helm.engine import Helm
from kubeop.helm.reconciler import DEFAULT_RECONCILE_PERIOD, HelmReconciler
from kubeop.helm.runtime import HelmRuntime
from kubeop.helm.watches import Watch, load_watches
from kubeop.manager import Manager

__all__ = ["HelmOperator", "run"]


class HelmOperator:
    """The controllers of a Helm operator.

    Args:
        watches: the entries of watches.yaml, or the path of the file.
        helm: a ready engine; by default one is created at the manager's start with its
            credentials and ``helm_options`` (``max_concurrent`` helm processes,
            ``openapi_validation``, ``binary``, ``timeout``, ``history_max``).
        reconcile_period: for entries that set none (seconds; operator-sdk's default, 1 min).
        max_concurrent_reconciles: for entries that set none (default: the number of CPUs).
        namespace: reconcile resources in this namespace only (operator-sdk's
            ``WATCH_NAMESPACE``); None: the whole cluster.
    """

    def __init__(
        self,
        watches: Sequence[Watch] | str | os.PathLike[str],
        *,
        helm: Helm | None = None,
        reconcile_period: float = DEFAULT_RECONCILE_PERIOD,
        max_concurrent_reconciles: int | None = None,
        namespace: str | None = None,
        **helm_options: Any,
    ) -> None:
        entries = load_watches(watches) if isinstance(watches, str | os.PathLike) else list(watches)
        if not entries:
            raise ValueError("a Helm operator needs at least one watch (watches.yaml is empty)")
        self.watches = entries
        self.runtime = HelmRuntime(helm, namespace=namespace, **helm_options)
        self.reconcilers = [
            HelmReconciler(
                w,
                self.runtime,
                reconcile_period=reconcile_period,
                max_concurrent_reconciles=max_concurrent_reconciles,
            )
            for w in entries
        ]

    @property
    def helm(self) -> Helm:
        """The engine (exists while the manager runs, or when one was given)."""
        return self.runtime.helm

    def controllers(self) -> list[Controller]:
        """One controller per watch, each reconciling its kind's releases."""
        return [r.controller() for r in self.reconcilers]

    def add_to(self, manager: Manager) -> None:
        """Add the controllers, and the runtime they share (which makes the engine and the
        release cache at the manager's start, and removes the engine's files at its stop)."""
        manager.add(self.runtime)
        for controller in self.controllers():
            manager.add(controller)

    def close(self) -> None:
        """Nothing left to do: the manager's stop removed the engine's private files (kept for
        the callers of before; a second call does nothing)."""
        self.runtime.close()


def run(
    watches_file: str | os.PathLike[str] = "watches.yaml",
    *,
    reconcile_period: float = DEFAULT_RECONCILE_PERIOD,
    max_concurrent_reconciles: int | None = None,
    max_helm_processes: int | None = None,
    namespace: str | None = None,
    openapi_validation: bool = True,
    **manager_options: Any,
) -> None:
    """Run a Helm operator until SIGTERM/SIGINT (the entry point of its container)."""
    operator = HelmOperator(
        Path(watches_file),
        reconcile_period=reconcile_period,
        max_concurrent_reconciles=max_concurrent_reconciles,
        namespace=namespace,
        max_concurrent=max_helm_processes,
        openapi_validation=openapi_validation,
    )
    manager_options.setdefault("name", "helm-operator")
    manager = Manager(**manager_options)
    operator.add_to(manager)
    manager.run()
