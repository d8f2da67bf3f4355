"""Templates: placeholders, and every template renders completely."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from kubeop.scaffold import ApiNames, Project, ProjectNames
from kubeop.scaffold.api import _values as _values_for_api
from kubeop.scaffold.apiserver import _values as _values_for_apiserver
from kubeop.scaffold.existing_kind import ExistingKind
from kubeop.scaffold.helm import HelmApi
from kubeop.scaffold.helm import _api_values as _api_values_for_helm
from kubeop.scaffold.helm import _values as _values_for_helm
from kubeop.scaffold.new_project import _Params
from kubeop.scaffold.render import render, template_text


def _values() -> dict[str, str]:
    """Every value init and create api give the templates (a placeholder outside them is a bug)."""
    project = Project(Path("/p"), "example.com", "r", "op", "op")
    params = _Params("example.com", "github.com/x/op", ProjectNames("op"), None)
    api = _values_for_api(project, ApiNames("g", "v1", "Kind", "example.com"), True)
    helm_api = _api_values_for_helm(HelmApi("g.example.com", "v1", "Kind", "helm-charts/c"), "g_v1_kind.yaml")
    existing = ExistingKind("g.example.com", "v1", "Kind", "kinds", builtin=False).template_values(True)
    apiserver = _values_for_apiserver(project, ApiNames("g", "v1", "Kind", "example.com"), True)
    helm = _values_for_helm(ProjectNames("op"))
    return {**params.values(), **existing, **api, **apiserver, **helm, **helm_api}


VALUES = _values()


def test_placeholders_are_replaced_and_other_syntax_is_left_alone() -> None:
    text = "{{ kind }} $(IMG) ${HOME} {x} {{kind}}"
    assert render(text, {"kind": "Guestbook"}) == "Guestbook $(IMG) ${HOME} {x} Guestbook"


def test_a_placeholder_without_a_value_is_an_error() -> None:
    with pytest.raises(KeyError, match="without a value: plural"):
        render("{{ kind }} {{ plural }}", {"kind": "Guestbook"})


def _templates() -> list[str]:
    base = resources.files("kubeop.scaffold").joinpath("templates")
    folders = [d for d in base.iterdir() if d.is_dir()]
    return sorted(f"{d.name}/{f.name}" for d in folders for f in d.iterdir() if f.name.endswith(".tmpl"))


def test_the_templates_ship_with_the_package() -> None:
    assert "project/main.py.tmpl" in _templates()
    assert "api/controller.py.tmpl" in _templates()


@pytest.mark.parametrize("name", _templates())
def test_every_template_renders_completely(name: str) -> None:
    out = render(template_text(name), VALUES)
    assert "{{" not in out and "}}" not in out
