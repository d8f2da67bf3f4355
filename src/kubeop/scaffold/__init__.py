"""kubeop.scaffold: operator projects laid out like kubebuilder's, in Python.

- :func:`init_project` (``kubeop init``), :func:`create_api` (``kubeop create api``),
  :func:`create_webhook` (``kubeop create webhook``) and :func:`create_apiserver` (``kubeop
  create apiserver``) write a project, its APIs, webhooks and aggregated API from the templates
  under ``templates/``, never clobbering user code;
- :func:`generated` / :func:`plan_manifests` (``kubeop manifests``) derive config/crd,
  config/rbac and config/samples from the project's models and ``@rbac_rule`` declarations, and
  :func:`stale_manifests` says whether config/ is up to date;
- :func:`helm_project_files` / :func:`helm_api_files` / :func:`plan_helm_manifests`: the same
  for a Helm operator project (``kubeop init --plugin helm``, :class:`HelmProject`);
- :func:`find_project` / :class:`Project` read the PROJECT file; :func:`build_kustomization`
  reads config/default for ``kubeop deploy``.

Everything here works on files; talking to a cluster is the CLI's business.
"""

from kubeop.scaffold.api import ApiResult, create_api
from kubeop.scaffold.apiserver import ApiServerResult, create_apiserver
from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.files import Change, Planned, pending, write_planned
from kubeop.scaffold.helm import (
    HELM_LAYOUT,
    HelmProject,
    HelmProjectError,
    copy_chart,
    find_helm_project,
    helm_api_files,
    helm_project_files,
    plan_helm_manifests,
    stale_helm_manifests,
    write_helm_build_context,
)
from kubeop.scaffold.kustomize import build as build_kustomization
from kubeop.scaffold.manifests import GENERATED, Generated, generated, plan_manifests, stale_manifests
from kubeop.scaffold.names import ApiNames, ProjectNames, check_namespace
from kubeop.scaffold.new_project import init_project
from kubeop.scaffold.project import PROJECT_FILE, Project, Resource, find_project, load_project
from kubeop.scaffold.webhook import WebhookResult, create_webhook

__all__ = [
    "GENERATED",
    "HELM_LAYOUT",
    "PROJECT_FILE",
    "ApiNames",
    "ApiResult",
    "ApiServerResult",
    "Change",
    "Generated",
    "HelmProject",
    "HelmProjectError",
    "Planned",
    "Project",
    "ProjectNames",
    "Resource",
    "ScaffoldError",
    "WebhookResult",
    "build_kustomization",
    "check_namespace",
    "copy_chart",
    "create_api",
    "create_apiserver",
    "create_webhook",
    "find_helm_project",
    "find_project",
    "generated",
    "helm_api_files",
    "helm_project_files",
    "init_project",
    "load_project",
    "pending",
    "plan_helm_manifests",
    "plan_manifests",
    "stale_helm_manifests",
    "stale_manifests",
    "write_helm_build_context",
    "write_planned",
]
