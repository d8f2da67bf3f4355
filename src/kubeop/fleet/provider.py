"""Cluster providers: what engages and disengages the clusters of a :class:`~kubeop.fleet.Fleet`.

A provider is a small runnable (``name``, ``async run(fleet, stop)``) that tells the fleet which
clusters exist while it runs: ``await fleet.engage(name, config)`` when one appears or its
credentials change, ``await fleet.disengage(name)`` when it goes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from kubeop.client import Client, ClientConfig
from kubeop.client.kubeconfig import load_kubeconfig
from kubeop.fleet._names import check_cluster_name

__all__ = ["ClusterProvider", "Engagement", "Kubeconfigs"]


class Engagement(Protocol):
    """The side of a fleet its providers talk to."""

    async def engage(
        self, name: str, config: ClientConfig, *, connect: Callable[[], Client] | None = None
    ) -> None:
        """Run the controllers against cluster ``name`` (again, with ``config``, if it changed);
        ``connect`` makes its client (default: ``Client(config)``)."""
        ...

    async def disengage(self, name: str) -> None:
        """Stop the controllers of cluster ``name`` and drop its caches (nothing if unknown)."""
        ...


@runtime_checkable
class ClusterProvider(Protocol):
    """Engages clusters in a fleet until ``stop`` is set (see the module docstring)."""

    name: str

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        """Engage and disengage clusters in ``fleet`` until ``stop`` is set."""
        ...


#: A cluster given by kubeconfig: a path, (path, context), or a ready ClientConfig.
KubeconfigSource = str | tuple[str, str] | ClientConfig


class Kubeconfigs:
    """A fixed set of clusters, each from a kubeconfig file (and context) or a ClientConfig::

        Kubeconfigs({"east": "east.yaml", "west": ("all.yaml", "west"), "local": config})

    Every cluster is engaged when the fleet starts; the files are read then (a missing file or
    context raises at start, naming the cluster).
    """

    name = "kubeconfigs"

    def __init__(self, clusters: Mapping[str, KubeconfigSource]) -> None:
        for key in clusters:
            check_cluster_name(key, where="Kubeconfigs")
        self._sources = dict(clusters)

    def configs(self) -> dict[str, ClientConfig]:
        """The clusters' configs (reads the files)."""
        out: dict[str, ClientConfig] = {}
        for name, source in self._sources.items():
            if isinstance(source, ClientConfig):
                config = source
            elif isinstance(source, tuple):
                path, context = source
                config = load_kubeconfig(path, context=context)
            elif isinstance(source, str):
                config = load_kubeconfig(source)
            else:
                raise TypeError(
                    f"Kubeconfigs: cluster {name!r} is a {type(source).__name__}: give a kubeconfig "
                    "path, (path, context) or a ClientConfig"
                )
            out[name] = config
        return out

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        """Engage every cluster, then wait for ``stop``."""
        for name, config in self.configs().items():
            await fleet.engage(name, config)
        await stop.wait()

    def __repr__(self) -> str:
        return f"Kubeconfigs({sorted(self._sources)!r})"
