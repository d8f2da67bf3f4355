"""``kubeop run``: the project's operator, here, against the cluster of the kubeconfig.

The operator runs as ``python -m <package>`` (what the image runs too), replacing this process,
so signals and the exit code are the operator's own. Arguments after ``--`` go to it:
``kubeop run -- --leader-elect --metrics-bind-address 0``.

A project with webhooks gets them registered for this run: a local CA and a certificate for the
webhook address (the files the operator's Manager serves from), and webhook configurations and
CRD conversions pointing at ``https://127.0.0.1:9443`` with that CA, applied before it starts.

A project with an aggregated API (``kubeop create apiserver``: ``<package>.apiserver``) gets it
served from this process while the operator runs (as a child, not exec'd): an APIService and an
ExternalName Service registered with the cluster, deleted again when the operator exits
(:mod:`kubeop.cli.local_apiserver`). ``--no-apiserver`` leaves it out. The permission check
(``--no-rbac-check`` skips it) then asks for what serving it needs too: to register those two
objects, and what every aggregated API server does (TokenReviews, SubjectAccessReviews, the
``kube-system/extension-apiserver-authentication`` ConfigMap).

``--log-format json`` and ``--log-level debug`` reach the operator as ``KUBEOP_LOG_FORMAT`` and
``KUBEOP_LOG_LEVEL``, which kubeop's logging setup reads (``kubeop.manager.configure_logging``).

Several clusters, one operator: ``--kubeconfig east.yaml --kubeconfig west.yaml`` (repeatable;
``NAME=PATH`` names a cluster, else the file's name does) and ``--cluster-secret-selector``
(kubeconfig Secrets in the hub, the cluster of ``$KUBECONFIG``) run the project's controllers on
every cluster as a :class:`~kubeop.fleet.Fleet` (``python -m kubeop.fleet <package>``). One
``--kubeconfig`` runs on that cluster as ever.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from kubeop.cli.cluster_ops import apply_all, connect
from kubeop.cli.local_apiserver import (
    ForeignObject,
    LocalApiServer,
    serve_with_operator,
    served_kinds,
    serving_accesses,
)
from kubeop.cli.output import Directory, any_project_at, errors_as_messages, fail, say
from kubeop.cli.permissions import Access, accesses, denied, identity
from kubeop.crd import crd_manifests
from kubeop.crd.rbac import LEASE_VERBS, PolicyRule
from kubeop.helm import HelmNotFound, WatchesError, find_helm, load_watches
from kubeop.manager.logs import LOG_FORMATS, LOG_LEVELS
from kubeop.scaffold import HelmProject, Project, generated
from kubeop.scaffold.helm import rbac_rules
from kubeop.webhook import Conversion, Endpoint, local_certificates, webhook_configurations, with_conversion
from kubeop.webhook.certs import CA_NAME, CertPathError, read_cert_file

__all__ = ["run"]

Kubeconfigs = Annotated[
    list[str] | None,
    typer.Option(
        "--kubeconfig",
        help="the cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config); repeat it to run "
        "on several clusters as one fleet (NAME=PATH names a cluster, else the file's name does)",
        show_default=False,
    ),
]

_TRUE = ("1", "true", "yes")


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _leader_election(args: Sequence[str]) -> tuple[bool, str | None]:
    """Whether the operator will elect a leader, and in which namespace if it was told."""
    enabled = os.environ.get("LEADER_ELECT", "false").lower() in _TRUE
    for arg in args:
        if arg == "--leader-elect":
            enabled = True
        elif arg == "--no-leader-elect":
            enabled = False
    namespace = (
        _flag_value(args, "--leader-election-namespace")
        or os.environ.get("LEADER_ELECTION_NAMESPACE")
        or os.environ.get("POD_NAMESPACE")
    )
    return enabled, namespace


def _manager_rules(project: Project | HelmProject) -> list[PolicyRule]:
    if isinstance(project, HelmProject):
        return rbac_rules(project.apis, [project.root / a.chart for a in project.apis])
    return generated(project, command="run").manager_rules()


def helm_command(project: HelmProject, args: Sequence[str]) -> list[str]:
    """``python -m kubeop.helm --watches-file <project>/watches.yaml ARGS``, once watches.yaml
    has a kind and a helm binary is there."""
    watches = project.root / "watches.yaml"
    try:
        if not load_watches(watches):
            fail("watches.yaml has no kinds yet: add one with kubeop create api --helm-chart")
        find_helm()
    except (WatchesError, HelmNotFound) as e:
        fail(str(e))
    return [sys.executable, "-m", "kubeop.helm", "--watches-file", str(watches), *args]


async def _check(
    project: Project | HelmProject,
    args: Sequence[str],
    kubeconfig: Path | None,
    served: LocalApiServer | None,
) -> None:
    rules = _manager_rules(project)
    elect, le_namespace = _leader_election(args)
    async with connect(kubeconfig, None) as client:
        wanted = accesses(rules)
        if elect:
            lease = PolicyRule(("coordination.k8s.io",), ("leases",), LEASE_VERBS)
            namespace = le_namespace or client.namespace or "default"
            wanted += [
                a for a in accesses([lease], namespace=namespace) if a.verb in ("get", "create", "update")
            ]
        serving = await serving_accesses(client, served) if served is not None else []
        also = f" and those serving its aggregated API needs ({len(serving)})" if serving else ""
        say(f"checking the operator's permissions ({len(wanted)} checks){also} ...")
        missing, missing_api = await denied(client, wanted), await denied(client, serving)
        if not (missing or missing_api):
            return
        problems = []
        if missing:
            roles = "config/rbac/role.yaml" + (" and leader_election_role.yaml" if elect else "")
            problems.append(
                f"{_listed(missing)}\nbut the operator{_declares(project)} it needs to ({roles}). Bind the "
                "generated RBAC to this identity (kubeop deploy does, for the operator's service account), "
                "run with a kubeconfig that has it"
            )
        if missing_api:
            problems.append(
                f"{_listed(missing_api)}\nwhich serving the project's aggregated API from here needs (its "
                "APIService and Service registered, and the reviews and the ConfigMap every aggregated API "
                "server asks for). Run with a kubeconfig that has it, leave the API out with --no-apiserver"
            )
        who = await identity(client)
        fail(
            f"Forbidden: {who} may not\n"
            + ".\nNor may it\n".join(problems)
            + ", or skip this check with --no-rbac-check"
        )


def _listed(missing: Sequence[tuple[Access, str]]) -> str:
    return "\n".join(f"  - {a.describe()}" for a, _ in missing)


def _declares(project: Project | HelmProject) -> str:
    return "'s charts say" if isinstance(project, HelmProject) else "'s code declares"


def local_webhook_objects(project: Project, args: Sequence[str]) -> list[dict[str, Any]]:
    """The CRDs with conversion webhooks and the webhook configurations for a local run (none
    without webhooks); makes the local CA and serving certificate when they are missing."""
    found = generated(project, command="run")
    if not found.webhooks:
        return []
    address = (
        _flag_value(args, "--webhook-bind-address")
        or os.environ.get("WEBHOOK_BIND_ADDRESS")
        or "127.0.0.1:9443"
    )
    host, _, port = address.rpartition(":")
    host = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    cert_dir = _flag_value(args, "--webhook-cert-dir") or os.environ.get("WEBHOOK_CERT_DIR")
    try:
        if not cert_dir:  # the operator started below makes the same choice: this user's private dir
            ca = local_certificates(hosts=(host,)).ca_pem
        else:
            try:
                ca = read_cert_file(cert_dir, CA_NAME)
            except OSError:
                fail(
                    f"{cert_dir} has no ca.crt: the API server needs the CA that signed tls.crt "
                    "(the caBundle)"
                )
    except CertPathError as exc:
        fail(str(exc))
    endpoint = Endpoint.url(f"https://{host}:{port}", ca_bundle=ca)
    conversions = {(c.group, c.kind): c for c in found.webhooks if isinstance(c, Conversion)}
    crds = []
    for crd in crd_manifests(found.models):
        conversion = conversions.get((crd["spec"]["group"], crd["spec"]["names"]["kind"]))
        if conversion is not None:
            crds.append(with_conversion(crd, conversion, endpoint))
    return [*crds, *webhook_configurations(found.webhooks, project.names.prefixed("webhook"), endpoint)]


def log_environment(log_format: str | None, log_level: str | None) -> dict[str, str]:
    """The environment variables that carry ``--log-format`` / ``--log-level`` to the operator."""
    env = {}
    for flag, value, choices, name in (
        ("--log-format", log_format, LOG_FORMATS, "KUBEOP_LOG_FORMAT"),
        ("--log-level", log_level, LOG_LEVELS, "KUBEOP_LOG_LEVEL"),
    ):
        if value is None:
            continue
        if value.lower() not in choices:
            fail(f"{flag} (or {name}) must be one of {', '.join(choices)}, got {value!r}")
        env[name] = value.lower()
    return env


def _fleet_environment(paths: Sequence[str], selector: str | None, namespace: str) -> dict[str, str]:
    """The variables that make the operator a fleet (``python -m kubeop.fleet``), checked: each
    --kubeconfig a cluster, the kubeconfig Secrets read from the hub ($KUBECONFIG's cluster).
    None for one cluster (at most one --kubeconfig, no selector: today's run)."""
    from kubeop.fleet.environment import (
        KUBECONFIGS_ENV,
        SECRET_NAMESPACE_ENV,
        SECRET_SELECTOR_ENV,
        check_selector,
        parse_kubeconfigs,
    )

    if len(paths) <= 1 and selector is None:
        if paths and not Path(paths[0]).is_file():
            fail(f"--kubeconfig {paths[0]}: no such file")
        return {}
    env: dict[str, str] = {}
    try:
        if paths:
            clusters = parse_kubeconfigs(list(paths), where="--kubeconfig")
            env[KUBECONFIGS_ENV] = os.pathsep.join(
                f"{name}={Path(path).resolve()}" for name, path in clusters.items()
            )
        if selector is not None:
            env[SECRET_SELECTOR_ENV] = check_selector(selector, where="--cluster-secret-selector")
            env[SECRET_NAMESPACE_ENV] = namespace
    except ValueError as exc:
        fail(str(exc))
    return env


def _member_paths(fleet_env: dict[str, str]) -> list[str]:
    """The kubeconfig files of a fleet run's fixed clusters (for the permission check)."""
    from kubeop.fleet.environment import KUBECONFIGS_ENV

    entries = fleet_env.get(KUBECONFIGS_ENV, "")
    return [e.partition("=")[2] for e in entries.split(os.pathsep) if e]


async def _register_webhooks(objs: Sequence[dict[str, Any]], kubeconfig: Path | None) -> None:
    async with connect(kubeconfig, None) as client:
        await apply_all(client, objs)


def run(
    ctx: typer.Context,
    directory: Directory = None,
    kubeconfig: Kubeconfigs = None,
    rbac_check: Annotated[
        bool, typer.Option(help="first ask the cluster whether it grants what the code declares")
    ] = True,
    webhooks: Annotated[
        bool, typer.Option(help="register the project's webhooks with the cluster, served from here")
    ] = True,
    log_format: Annotated[
        str | None,
        typer.Option(help="the operator's log lines: text or json", envvar="KUBEOP_LOG_FORMAT"),
    ] = None,
    log_level: Annotated[
        str | None,
        typer.Option(
            help="the operator's log level: debug, info, warning, error, critical", envvar="KUBEOP_LOG_LEVEL"
        ),
    ] = None,
    dashboard: Annotated[
        bool,
        typer.Option(
            help="serve the live dashboard on http://127.0.0.1:8090/ (KUBEOP_DASHBOARD=host:port: elsewhere)"
        ),
    ] = False,
    cluster_secret_selector: Annotated[
        str | None,
        typer.Option(
            help="also run on the clusters whose kubeconfig Secrets in the hub (the cluster of "
            "$KUBECONFIG) match this label selector, e.g. cluster.x-k8s.io/cluster-name (Cluster API's)",
            show_default=False,
        ),
    ] = None,
    cluster_secret_namespace: Annotated[
        str, typer.Option(help="the hub namespace of the kubeconfig Secrets (--cluster-secret-selector)")
    ] = "default",
    apiserver: Annotated[
        bool,
        typer.Option(
            help="serve the project's aggregated API (<package>.apiserver) from here, behind the "
            "cluster's API server (an APIService, deleted again on exit)"
        ),
    ] = True,
    apiserver_sqlite: Annotated[
        Path | None,
        typer.Option(help="keep the aggregated API's objects in this SQLite file (default: in memory)"),
    ] = None,
) -> None:
    """Run the operator here against the cluster; arguments after -- go to the operator."""
    args = list(ctx.args)
    paths = kubeconfig or []
    with errors_as_messages():
        fleet_env = _fleet_environment(paths, cluster_secret_selector, cluster_secret_namespace)
        # One cluster: the --kubeconfig given (or $KUBECONFIG); a fleet: each --kubeconfig's, or
        # with only --cluster-secret-selector the hub's ($KUBECONFIG), never none.
        given = _member_paths(fleet_env) if fleet_env else paths
        members: list[Path | None] = [Path(p) for p in given] or [None]
        logging_env = log_environment(log_format, log_level)
        project = any_project_at(directory)
        if isinstance(project, HelmProject):
            if fleet_env:
                fail(
                    "a Helm operator runs on one cluster: give one --kubeconfig, no --cluster-secret-selector"
                )
            command = helm_command(project, args)
        elif not (project.package_dir / "__main__.py").is_file():
            fail(f"{project.package_dir / '__main__.py'} is missing: restore it (kubeop init --force) to run")
        elif fleet_env:
            if dashboard:
                fail("the dashboard shows one Manager's cluster; a fleet run has none yet: drop --dashboard")
            command = [sys.executable, "-m", "kubeop.fleet", project.package, *args]
        else:
            command = [sys.executable, "-m", project.package, *args]
        served: LocalApiServer | None = None
        if apiserver and isinstance(project, Project):
            served = served_kinds(project)
            if served is not None and fleet_env:
                fail("a fleet run (several clusters) does not serve the aggregated API: add --no-apiserver")
        if rbac_check:
            for member in members:
                asyncio.run(_check(project, args, member, served))
        if webhooks and isinstance(project, Project):
            objs = local_webhook_objects(project, args)
            if objs and fleet_env:
                fail("a fleet run (several clusters) does not serve webhooks yet: add --no-webhooks")
            if objs:
                asyncio.run(_register_webhooks(objs, members[0]))
    env = dict(os.environ) | logging_env | fleet_env
    if dashboard and not env.get("KUBEOP_DASHBOARD"):
        env["KUBEOP_DASHBOARD"] = "1"  # the Manager reads it (kubeop.manager.options.Dashboard)
    if paths and not fleet_env:  # a fleet's hub (its kubeconfig Secrets) stays $KUBECONFIG's cluster
        env["KUBECONFIG"] = str(paths[0])
    source = project.root if isinstance(project, HelmProject) else project.package_root
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(source), env.get("PYTHONPATH")) if p)
    starting = f"starting {project.project_name}: python -m {' '.join(command[2:])}"
    if served is not None:
        sqlite = str(apiserver_sqlite.resolve()) if apiserver_sqlite else None
        with errors_as_messages():
            try:
                code = asyncio.run(
                    serve_with_operator(
                        served,
                        kubeconfig=members[0],
                        sqlite=sqlite,
                        command=command,
                        env=env,
                        starting=starting,
                    )
                )
            except (ForeignObject, ValueError) as exc:  # ValueError: no aggregation layer, a bad kind
                fail(str(exc))
        raise typer.Exit(code)
    say(starting)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, env)
