"""The OpenAPI documents of an aggregated API, from the models' schemas (the CRD generator's):
``/openapi/v3`` (the index kube-apiserver merges), ``/openapi/v3/apis/<group>/<version>`` (one
schema per kind, tagged with ``x-kubernetes-group-version-kind`` for kubectl explain) and a
``/openapi/v2`` with the same definitions for clients that still read it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import orjson

from kubeop.apiserver.resource import ServedResource

__all__ = ["OpenApi"]


class OpenApi:
    """The documents of one group version, built once."""

    def __init__(self, group: str, version: str, resources: Sequence[ServedResource]) -> None:
        self.path = f"apis/{group}/{version}"
        prefix = ".".join(reversed(group.split(".")))
        schemas: dict[str, Any] = {}
        for served in resources:
            schema = dict(served.schema)
            schema["x-kubernetes-group-version-kind"] = [
                {"group": group, "version": version, "kind": served.decl.kind}
            ]
            schemas[f"{prefix}.{version}.{served.decl.kind}"] = schema
        info = {"title": f"{group} (kubeop)", "version": version}
        self.v3 = orjson.dumps(
            {"openapi": "3.0.0", "info": info, "paths": {}, "components": {"schemas": schemas}}
        )
        digest = hashlib.sha512(self.v3).hexdigest().upper()[:64]
        self.index = orjson.dumps(
            {"paths": {self.path: {"serverRelativeURL": f"/openapi/v3/{self.path}?hash={digest}"}}}
        )
        self.v2 = orjson.dumps({"swagger": "2.0", "info": info, "paths": {}, "definitions": schemas})
