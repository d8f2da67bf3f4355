"""An aggregated API served from the test process behind a control plane's kube-apiserver, put
there the way ``kubeop run`` puts its own: the serving certificate of :func:`local_certificates`
for the names kube-apiserver checks, and the ExternalName Service naming 127.0.0.1 and the
APIService of :func:`local_apiserver_objects` (the working shape on a loopback control plane:
without --enable-aggregator-routing the aggregator dials an ExternalName's host directly)."""

from __future__ import annotations

import json
from pathlib import Path

from kubeop.cli.local_apiserver import LocalApiServer, local_apiserver_objects
from kubeop.testing import ControlPlane
from kubeop.webhook import local_certificates

__all__ = ["register", "serving_certificates"]


def serving_certificates(api: LocalApiServer, directory: Path) -> bytes:
    """Issue a CA and a serving certificate for ``api``'s Service name into ``directory`` (an
    APIServer's ``cert_dir``); returns the CA (the APIService's caBundle)."""
    return local_certificates(directory, hosts=api.hosts).ca_pem


def register(cp: ControlPlane, api: LocalApiServer, *, port: int, ca: bytes | None) -> None:
    """Apply (kubectl) the Service and the APIService sending ``api``'s group version to
    ``127.0.0.1:port``; ``ca`` None: an APIService without a caBundle (one a CertRotator fills)."""
    service, apiservice = local_apiserver_objects(api, port=port, ca=ca or b"")
    if ca is None:
        del apiservice["spec"]["caBundle"]
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [service, apiservice]}),
    )
