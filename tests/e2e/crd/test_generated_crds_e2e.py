"""The API server accepts every CRD the unit tests generate, with no warning and no change.

"The server must accept every generated CRD" is checked here for real: this module imports the
unit-test modules of kubeop.crd, takes every declared CustomResource class defined at their top
level (grouping versions of one kind), and adds one CRD whose spec holds every construct of
test_schema.VALID. Each CRD is created with a server-side dry run (which must print no
warning), installed (it must become Established), and read back: the stored schema must equal
the generated one, so nothing was silently dropped.

Unit tests keep models that must be *rejected* inside test functions, where this module does
not see them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import pytest
from pydantic import Field, create_model

from kubeop.crd import CustomResource, crd_manifest, crd_manifests, custom_resources

from .conftest import CRDS, installed

pytestmark = pytest.mark.controlplane

UNIT_TESTS = Path(__file__).resolve().parents[2] / "unit" / "crd"
GROUP = "constructs.crd-tests.kubeop.dev"


def unit_test_modules() -> list[ModuleType]:
    modules = []
    for path in sorted(UNIT_TESTS.glob("test_*.py")):
        name = f"_kubeop_crd_e2e_{path.stem}"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        modules.append(sys.modules[name])
    return modules


def construct_catalog(modules: list[ModuleType]) -> type[CustomResource]:
    """One kind whose spec has a field per construct of test_schema.VALID (named by its id)."""
    (schema_tests,) = [m for m in modules if m.__name__.endswith("test_schema")]
    fields: dict[str, Any] = {
        f"case_{i}": (Annotated[param.values[0], Field(alias=param.id)], ...)
        for i, param in enumerate(schema_tests.VALID)
    }
    spec = create_model("ConstructCatalogSpec", **fields)
    catalog: type[CustomResource] = create_model(
        "ConstructCatalog",
        __base__=CustomResource,
        __cls_kwargs__={"group": GROUP, "version": "v1"},
        spec=(spec, ...),
    )
    return catalog


MODULES = unit_test_modules()
MODELS = custom_resources(*MODULES)
CATALOG = construct_catalog(MODULES)
GENERATED = [*crd_manifests(MODELS), crd_manifest(CATALOG)]


def test_the_unit_tests_provide_crds_to_check() -> None:
    names = [c["metadata"]["name"] for c in GENERATED]
    assert len(names) == len(set(names)) >= 7
    catalog_spec = GENERATED[-1]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert len(catalog_spec["properties"]) == len(
        next(m for m in MODULES if m.__name__.endswith("schema")).VALID
    )


@pytest.mark.parametrize("crd", GENERATED, ids=[c["metadata"]["name"] for c in GENERATED])
def test_server_side_dry_run_accepts_without_warnings(control_plane: Any, crd: dict[str, Any]) -> None:
    res = control_plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(crd), check=False)
    assert res.returncode == 0, res.stderr
    assert "Warning" not in res.stderr, res.stderr


@pytest.fixture(scope="module")
def installed_crds(control_plane: Any) -> Iterator[list[str]]:
    yield from installed(control_plane, GENERATED)


@pytest.mark.parametrize("crd", GENERATED, ids=[c["metadata"]["name"] for c in GENERATED])
def test_installed_crds_are_established_and_stored_unchanged(
    control_plane: Any, installed_crds: list[str], crd: dict[str, Any]
) -> None:
    stored = control_plane.api.call("GET", f"{CRDS}/{crd['metadata']['name']}")
    conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
    assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
    assert stored["status"]["acceptedNames"]["kind"] == crd["spec"]["names"]["kind"]
    for sent, kept in zip(crd["spec"]["versions"], stored["spec"]["versions"], strict=True):
        assert kept["schema"] == sent["schema"]
        for key in ("additionalPrinterColumns", "subresources", "selectableFields", "deprecationWarning"):
            assert kept.get(key) == sent.get(key), key


def test_an_object_of_every_unit_model_is_accepted_and_reads_back(
    control_plane: Any, installed_crds: list[str], namespace: str
) -> None:
    required = {"Job": {"cronSpec": "* * * * *"}}  # everything else is left to the server's defaults
    for model in MODELS:
        decl = model.__crd__
        obj = {
            "apiVersion": decl.api_version,
            "kind": decl.kind,
            "metadata": {"name": f"sample-{decl.version}"},
            "spec": required.get(decl.kind, {}),
        }
        where = ["-n", namespace] if decl.namespaced else []
        res = control_plane.kubectl(
            "create", *where, "-f", "-", "-o", "json", input=json.dumps(obj), check=False
        )
        assert res.returncode == 0, (decl.api_version, decl.kind, res.stderr)
        created = model.model_validate(json.loads(res.stdout))
        assert created.metadata.name == f"sample-{decl.version}"
