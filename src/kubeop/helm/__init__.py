"""kubeop.helm: the Helm-based operator. A chart plus a custom resource's spec as its values,
with the whole lifecycle managed.

- :func:`load_watches` / :func:`write_watches` / :class:`Watch`: watches.yaml (operator-sdk's format);
- :func:`crd_for_chart`: the CRD for a chart (open spec or from values.schema.json);
- :func:`release_values`, :func:`inject_owner_references`, :func:`manifests_equal`,
  :class:`HelmStatus`: the pure pieces, usable on their own.
"""

from kubeop.helm.crd import HelmChartError, crd_for_chart, open_spec_schema, schema_from_values_schema
from kubeop.helm.manifest import ManifestError, diff_manifests, manifests_equal, parse_manifest
from kubeop.helm.postrender import inject_owner_references
from kubeop.helm.status import HelmStatus, Reason
from kubeop.helm.values import ValuesError, release_values
from kubeop.helm.watches import Watch, WatchesError, expand_env, load_watches, parse_watches, write_watches

__all__ = [
    "HelmChartError",
    "HelmStatus",
    "ManifestError",
    "Reason",
    "ValuesError",
    "Watch",
    "WatchesError",
    "crd_for_chart",
    "diff_manifests",
    "expand_env",
    "inject_owner_references",
    "load_watches",
    "manifests_equal",
    "open_spec_schema",
    "parse_manifest",
    "parse_watches",
    "release_values",
    "schema_from_values_schema",
    "write_watches",
]
