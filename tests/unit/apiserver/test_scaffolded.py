"""What `kubeop create apiserver` writes runs: the scaffolded kinds served by an APIServer."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeop.crd import CustomResource
from kubeop.scaffold import create_apiserver, find_project, init_project
from tests.unit.apiserver.conftest import Env
from tests.unit.apiserver.test_http import call

PACKAGE = "scaffolded_api"


@pytest.fixture
def kinds(tmp_path: Path) -> Iterator[list[type[CustomResource]]]:
    root = tmp_path / "scaffolded-api"
    init_project(root, domain="example.com", repo="github.com/example/scaffolded-api")
    create_apiserver(find_project(root), group="metrics", version="v1alpha1", kind="Usage")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{PACKAGE}.apiserver").kinds()  # type: ignore[no-any-return]
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
            del sys.modules[name]


async def test_the_scaffolded_kind_is_served(env: Env) -> None:
    url = env.base + "/apis/metrics.example.com/v1alpha1/namespaces/default/usages"
    async with env.as_user("alice") as s:
        body = {"apiVersion": "metrics.example.com/v1alpha1", "kind": "Usage", "metadata": {"name": "u"}}
        code, made = await call(s, "POST", url, {**body, "spec": {"foo": "bar"}})
        assert code == 201, made
        code, got = await call(s, "GET", url + "/u")
        assert code == 200 and got["spec"] == {"foo": "bar"}
