"""kubeop.helm: the Helm-based operator. A chart plus a custom resource's spec as its values,
with the whole lifecycle managed.

- :func:`load_watches` / :func:`write_watches` / :class:`Watch`: watches.yaml (operator-sdk's format);
- :class:`HelmOperator`: one controller per watch, to add to a :class:`~kubeop.manager.Manager`;
  :func:`run` / ``python -m kubeop.helm``: the operator process;
- :class:`HelmReconciler`: install, upgrade, roll back, uninstall, restore (see its module);
- :class:`Helm`: the real helm binary as asyncio subprocesses; :class:`ReleaseStore`: Helm's
  release storage read from the cache;
- :func:`crd_for_chart`: the CRD for a chart (open spec or from values.schema.json); the
  project files of ``kubeop init --plugin helm`` are :mod:`kubeop.scaffold.helm`'s;
- :func:`release_values`, :func:`inject_owner_references`, :func:`manifests_equal`,
  :class:`HelmStatus`: the pure pieces, usable on their own.
"""

from kubeop.helm.crd import HelmChartError, crd_for_chart, open_spec_schema, schema_from_values_schema
from kubeop.helm.dependents import DependentWatches, dependent_changed, owner_requests
from kubeop.helm.engine import Helm, HelmError, HelmNotFound, find_helm
from kubeop.helm.manifest import ManifestError, diff_manifests, manifests_equal, parse_manifest
from kubeop.helm.operator import HelmOperator, run
from kubeop.helm.postrender import inject_owner_references
from kubeop.helm.reconciler import (
    FINALIZER,
    RECONCILE_PERIOD_ANNOTATION,
    ROLLBACK_FORCE_ANNOTATION,
    UNINSTALL_WAIT_ANNOTATION,
    UPGRADE_FORCE_ANNOTATION,
    HelmReconciler,
    ReleaseError,
)
from kubeop.helm.releases import Release, ReleaseStore
from kubeop.helm.status import HelmStatus, Reason
from kubeop.helm.values import ValuesError, release_values
from kubeop.helm.watches import Watch, WatchesError, expand_env, load_watches, parse_watches, write_watches

__all__ = [
    "FINALIZER",
    "RECONCILE_PERIOD_ANNOTATION",
    "ROLLBACK_FORCE_ANNOTATION",
    "UNINSTALL_WAIT_ANNOTATION",
    "UPGRADE_FORCE_ANNOTATION",
    "DependentWatches",
    "Helm",
    "HelmChartError",
    "HelmError",
    "HelmNotFound",
    "HelmOperator",
    "HelmReconciler",
    "HelmStatus",
    "ManifestError",
    "Reason",
    "Release",
    "ReleaseError",
    "ReleaseStore",
    "ValuesError",
    "Watch",
    "WatchesError",
    "crd_for_chart",
    "dependent_changed",
    "diff_manifests",
    "expand_env",
    "find_helm",
    "inject_owner_references",
    "load_watches",
    "manifests_equal",
    "open_spec_schema",
    "owner_requests",
    "parse_manifest",
    "parse_watches",
    "release_values",
    "run",
    "schema_from_values_schema",
    "write_watches",
]
