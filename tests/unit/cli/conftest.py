"""Fixtures for the scaffolding tests: a fresh project on disk, made through the library API."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeop.scaffold import Project, create_api, find_project, init_project

DOMAIN = "example.com"
REPO = "github.com/example/guestbook-operator"


def new_project(parent: Path, name: str = "guestbook-operator") -> Project:
    root = parent / name
    init_project(root, domain=DOMAIN, repo=REPO)
    return find_project(root)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """An initialised project with one namespaced kind (webapp/v1 Guestbook) and its controller."""
    created = new_project(tmp_path)
    return create_api(created, group="webapp", version="v1", kind="Guestbook").project


def read(project: Project, path: str) -> str:
    return (project.root / path).read_text()


@pytest.fixture
def project_with_two_kinds(tmp_path: Path) -> Path:
    """A project with a namespaced kind in two versions and a cluster-scoped one, all with controllers."""
    created = new_project(tmp_path)
    created = create_api(created, group="webapp", version="v1", kind="Guestbook").project
    created = create_api(created, group="webapp", version="v2", kind="Guestbook").project
    create_api(created, group="ops", version="v1alpha1", kind="Policy", namespaced=False)
    return created.root
