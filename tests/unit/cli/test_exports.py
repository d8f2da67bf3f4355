"""kubeop.scaffold's public names are pinned, and it works on files only: no client, no cluster."""

from __future__ import annotations

import ast
import pathlib

import kubeop.scaffold

MODULES = {
    "api",
    "apiserver",
    "confined_copy",
    "errors",
    "existing_kind",
    "files",
    "grafana",
    "helm",
    "image",
    "kustomize",
    "loader",
    "manifests",
    "markers",
    "names",
    "new_project",
    "project",
    "render",
    "webhook",
    "wheel",
}


def test_all_is_complete() -> None:
    public = sorted(n for n in vars(kubeop.scaffold) if n.isidentifier() and not n.startswith("_"))
    assert sorted(kubeop.scaffold.__all__) == [n for n in public if n not in MODULES]


def test_scaffold_imports_only_crd_webhook_and_itself() -> None:
    # The layers under it that do I/O (client, cache, controller, manager) are the CLI's business.
    package = pathlib.Path(kubeop.scaffold.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("kubeop"):
                    # kubeop.webhook: the webhook declarations and their manifests, as crd for CRDs;
                    # a Helm project's CRDs and watches.yaml come from kubeop.helm's pure modules;
                    # YAML written by others is read with kubeop.core's bounded loader (pure too).
                    # kubeop.kinds: which built-in kinds exist, for their controllers (pure models).
                    allowed = (
                        "kubeop.crd",
                        "kubeop.scaffold",
                        "kubeop.webhook",
                        "kubeop.binaries",
                        "kubeop.kinds",
                    )
                    pure = ("kubeop.helm.crd", "kubeop.helm.watches", "kubeop.core.yaml_input")
                    assert name.startswith(allowed) or name in pure, (
                        path.name,
                        name,
                    )
