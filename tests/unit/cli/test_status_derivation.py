"""A generated controller's status, and the Memcached tutorial's, are derived from what the
children report (operator-sdk's tutorial does the same): Ready only with every Pod available,
Progressing while rolling out, Degraded with the Deployment's reason when it fails."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeop.scaffold import Project

Conditions = Callable[..., list[tuple[str, bool, str, str]]]
TUTORIAL = (
    Path(__file__).resolve().parents[3] / "docs" / "tutorials" / "memcached" / "memcached_controller.py"
)


def deployment(
    replicas: int,
    *,
    available: int,
    updated: int | None = None,
    generation: int = 1,
    seen: int = 1,
    failure: str | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "observedGeneration": seen,
        "availableReplicas": available,
        "updatedReplicas": available if updated is None else updated,
    }
    if failure is not None:
        status["conditions"] = [
            {"type": "Progressing", "status": "False", "reason": failure, "message": "it did not finish"}
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "generation": generation},
        "spec": {"replicas": replicas},
        "status": status,
    }


def by_type(conditions: list[tuple[str, bool, str, str]]) -> dict[str, tuple[bool, str]]:
    return {type_: (status, reason) for type_, status, reason, _ in conditions}


@pytest.fixture
def scaffolded(project: Project) -> Iterator[Conditions]:
    sys.path.insert(0, str(project.root))
    try:
        module = importlib.import_module(f"{project.package}.controllers.guestbook")
        yield module.conditions_from
    finally:
        sys.path.remove(str(project.root))
        for name in [n for n in sys.modules if n.startswith(project.package)]:
            del sys.modules[name]


def test_the_scaffolded_controller_derives_its_conditions(scaffolded: Conditions) -> None:
    assert by_type(scaffolded([])) == {
        "Ready": (True, "Reconciled"),
        "Progressing": (False, "Reconciled"),
        "Degraded": (False, "Reconciled"),
    }
    rolling = scaffolded([deployment(3, available=1)])
    assert by_type(rolling)["Ready"] == (False, "Progressing") and by_type(rolling)["Progressing"][0]
    assert "Deployment web: 1/3 available" in rolling[0][3]
    assert by_type(scaffolded([deployment(3, available=3)]))["Ready"] == (True, "Available")
    stale = deployment(3, available=3, generation=2, seen=1)  # the new spec not yet seen
    assert by_type(scaffolded([stale]))["Ready"] == (False, "Progressing")
    assert by_type(scaffolded([deployment(3, available=3, updated=1)]))["Ready"] == (False, "Progressing")
    failed = by_type(scaffolded([deployment(3, available=1, failure="ProgressDeadlineExceeded")]))
    assert failed["Ready"] == (False, "ProgressDeadlineExceeded") and failed["Degraded"][0] is True
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert by_type(scaffolded([config]))["Ready"] == (True, "Available")


@pytest.fixture
def tutorial() -> Iterator[Conditions]:
    """The tutorial's controller module, its project's Memcached kind stood in for."""
    names = ["memcached_operator", "memcached_operator.api", "memcached_operator.api.v1"]
    stand_ins = {name: types.ModuleType(name) for name in [*names, "memcached_operator.api.v1.memcached"]}
    stand_ins["memcached_operator.api.v1.memcached"].Memcached = type("Memcached", (), {})  # type: ignore[attr-defined]
    sys.modules.update(stand_ins)
    try:
        namespace: dict[str, Any] = {"__name__": "tutorial_controller"}
        exec(compile(TUTORIAL.read_text(), str(TUTORIAL), "exec"), namespace)
        yield namespace["deployment_conditions"]
    finally:
        for name in stand_ins:
            del sys.modules[name]


def test_the_tutorials_memcached_is_ready_only_with_its_pods_available(tutorial: Conditions) -> None:
    assert by_type(tutorial(deployment(2, available=2), 2))["Ready"] == (True, "Available")
    rolling = by_type(tutorial(deployment(2, available=1), 2))
    assert rolling["Ready"] == (False, "Progressing") and rolling["Progressing"] == (True, "Progressing")
    unseen = {"metadata": {"name": "m", "generation": 1}}  # just created: no status yet
    assert by_type(tutorial(unseen, 2))["Ready"] == (False, "Progressing")
    failed = by_type(tutorial(deployment(2, available=0, failure="ProgressDeadlineExceeded"), 2))
    assert failed["Ready"] == (False, "ProgressDeadlineExceeded") and failed["Degraded"][0] is True
