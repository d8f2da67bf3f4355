"""``kubeop create webhook``: defaulting, validating and conversion webhooks for a kind of the project.

::

    create_webhook(project, group="webapp", version="v1", kind="Guestbook", defaulting=True,
                   validation=True, conversion=False)

writes ``<package>/webhooks/<module>_<version>.py`` (handlers on the kind's model, collected in
``WEBHOOKS``) and ``tests/test_<module>_<version>_webhook.py``, adds ``WEBHOOKS`` to main.py at
the ``webhooks`` scaffold marker and regenerates the manifests (``config/webhook``; a converted
kind's CRD gets ``conversion: Webhook``). With ``conversion`` the version is the hub and every
other version of the kind in the project a spoke, through typed functions in the same file that
start as field-by-field copies.

Guarantees as ``create api``: an existing file is never rewritten; a second run changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.files import Change, Planned, write_planned
from kubeop.scaffold.manifests import generated, plan_manifests
from kubeop.scaffold.markers import MarkerMissing, insert_at_marker
from kubeop.scaffold.names import ApiNames
from kubeop.scaffold.project import Project, Resource

__all__ = ["WebhookResult", "create_webhook"]


@dataclass
class WebhookResult:
    path: str
    changes: list[Change] = field(default_factory=list)
    exists: bool = False
    todo: list[str] = field(default_factory=list)


def _spokes(project: Project, api: ApiNames) -> list[Resource]:
    return [
        r
        for r in project.resources
        if r.api and (r.group, r.kind) == (api.group, api.kind) and r.version != api.version
    ]


def _model_module(project: Project, api: ApiNames, version: str) -> str:
    """Where the model of ``version`` lives: as PROJECT recorded it (a multigroup project's APIs are
    under api/<group>/), else api/<version>/."""
    recorded = project.find(Resource(api.group, version, api.kind, project.domain))
    if recorded is not None and recorded.path:
        return recorded.path
    return f"{project.package}.api.{version}.{api.module}"


def _source(
    project: Project, api: ApiNames, defaulting: bool, validation: bool, spokes: list[Resource]
) -> str:
    kind, mod, ver = api.kind, api.module, api.version
    names = (["Allowed", "Denied", "FieldError", "validating"] if validation else []) + (
        ["defaulting"] if defaulting else []
    )
    if spokes:
        names.append("Conversion")
    # isort's order, so the project's ruff is happy: classes before functions, modules by name
    ordered = sorted(names, key=lambda n: (not n[0].isupper(), n))
    imports = [f"from kubeop.webhook import {', '.join(ordered)}", ""]
    own = [(_model_module(project, api, ver), kind)]
    own += [
        (_model_module(project, api, sp.version), f"{kind} as {kind}{sp.version.capitalize()}")
        for sp in spokes
    ]
    imports += [f"from {module} import {name}" for module, name in sorted(own)]
    out = [
        f'"""Webhooks of {kind} ({api.api_version}), served by the Manager over HTTPS.',
        "",
        "``kubeop manifests`` turns WEBHOOKS into config/webhook; tests call the handlers directly.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        *imports,
        "",
    ]
    webhooks = []
    if defaulting:
        webhooks.append(f"default_{mod}")
        out += [
            "",
            f"@defaulting({kind})",
            f"def default_{mod}(obj: {kind}) -> {kind}:",
            '    """Fill in what a user left out: the JSON patch is computed from the returned object."""',
            '    # TODO(user): set defaults, e.g. if obj.spec.foo is None: obj.spec.foo = "bar"',
            "    return obj",
            "",
        ]
    if validation:
        webhooks.append(f"validate_{mod}")
        out += [
            "",
            f"@validating({kind})",
            f"def validate_{mod}(new: {kind}, old: {kind} | None, operation: str) -> Allowed | None:",
            '    """Reject what the schema cannot express; name each offending field (kubectl shows it)."""',
            "    # TODO(user): your rules, e.g.",
            '    if new.spec.foo == "forbidden":',
            '        raise Denied(fields=[FieldError("spec.foo", "must not be \'forbidden\'")])',
            "    return None  # or Allowed(warnings=[...])",
            "",
        ]
    if spokes:
        webhooks.append(f"conversion_{mod}")
        pairs = []
        for spoke in spokes:
            alias, v = f"{kind}{spoke.version.capitalize()}", spoke.version
            pairs.append(f"{alias}: ({v}_to_hub, {v}_from_hub)")
            out += [
                "",
                f"def {v}_to_hub(old: {alias}) -> {kind}:",
                f'    """{kind} {v} -> {ver} (the hub).',
                "",
                f"    TODO(user): move each field to where {ver} keeps it (this copies them as they are).",
                '    """',
                '    data = old.model_dump(mode="json", by_alias=True, exclude_none=True)',
                f'    return {kind}.model_validate({{**data, "apiVersion": {kind}.api_version}})',
                "",
                "",
                f"def {v}_from_hub(hub: {kind}) -> {alias}:",
                f'    """{kind} {ver} (the hub) -> {v}: the inverse of {v}_to_hub; nothing may be lost."""',
                '    data = hub.model_dump(mode="json", by_alias=True, exclude_none=True)',
                f'    return {alias}.model_validate({{**data, "apiVersion": {alias}.api_version}})',
                "",
            ]
        out += [
            "",
            f"conversion_{mod} = Conversion.of_models({kind}, functions={{{', '.join(pairs)}}})",
            "",
        ]
    out += ["", f"WEBHOOKS = [{', '.join(webhooks)}]", ""]
    return "\n".join(out)


def _test_source(
    project: Project, api: ApiNames, defaulting: bool, validation: bool, spokes: list[Resource]
) -> str:
    pkg, kind, mod, ver = project.package, api.kind, api.module, api.version
    module = f"{pkg}.webhooks.{mod}_{ver}"
    out = [
        f'"""The {kind} {ver} webhooks, called as the API server calls them (no cluster needed)."""',
        "",
        "from __future__ import annotations",
        "",
        "import base64",
        "import json",
        "from typing import Any",
        "",
        "from kubeop.webhook import AdmissionWebhook",
        "from kubeop.webhook.review import AdmissionRequest, decode_admission",
        "",
        f"from {module} import WEBHOOKS",
        "",
        "",
        "def review(obj: dict[str, Any]) -> AdmissionRequest:",
        "    body = {",
        '        "apiVersion": "admission.k8s.io/v1",',
        '        "kind": "AdmissionReview",',
        '        "request": {"uid": "u", "operation": "CREATE", "object": obj},',
        "    }",
        "    return decode_admission(json.dumps(body).encode())",
        "",
        "",
        "SAMPLE: dict[str, Any] = {",
        f'    "apiVersion": "{api.api_version}",',
        f'    "kind": "{kind}",',
        '    "metadata": {"name": "sample"},',
        '    "spec": {},',
        "}",
        "",
        "",
        "async def test_every_webhook_answers_the_sample() -> None:",
        "    for webhook in WEBHOOKS:",
        "        if not isinstance(webhook, AdmissionWebhook):",
        "            continue  # the conversion: see test_round_trip",
        '        out = json.loads(await webhook.review(review(SAMPLE)))["response"]',
        '        assert out["allowed"] is True, out',
        '        if "patch" in out:',
        '            assert isinstance(json.loads(base64.b64decode(out["patch"])), list)',
        "",
    ]
    if spokes:
        out += [
            "",
            "def test_round_trip() -> None:",
            f"    from {module} import conversion_{mod}",
            "",
        ]
        for spoke in spokes:
            out += [
                f'    old = {{**SAMPLE, "apiVersion": "{api.full_group}/{spoke.version}"}}',
                f'    hub = conversion_{mod}.convert(old, "{api.api_version}")',
                f'    assert conversion_{mod}.convert(hub, old["apiVersion"]) == old',
            ]
        out.append("")
    return "\n".join(out)


def create_webhook(
    project: Project,
    *,
    group: str,
    version: str,
    kind: str,
    defaulting: bool = False,
    validation: bool = False,
    conversion: bool = False,
) -> WebhookResult:
    """Add webhooks for a kind of ``project`` (see the module docstring)."""
    if not (defaulting or validation or conversion):
        raise ScaffoldError(
            "nothing to create: pass --defaulting, --programmatic-validation and/or --conversion"
        )
    project.require_own_package("create webhook")
    api = ApiNames(group, version, kind, project.domain)
    pkg = project.package
    recorded = project.find(Resource(group, version, kind, project.domain))
    if recorded is None or not recorded.api:
        raise ScaffoldError(
            f"the project has no {kind} {version} model; create it first: "
            f"kubeop create api --group {group} --version {version} --kind {kind}"
        )
    spokes = _spokes(project, api) if conversion else []
    if conversion and not spokes:
        raise ScaffoldError(
            f"--conversion: {kind} has no other version in the project to convert to {version}; "
            f"create one first (kubeop create api --group {group} --version <other> --kind {kind})"
        )
    path = f"{pkg}/webhooks/{api.module}_{version}.py"
    result = WebhookResult(path)
    if (project.root / path).exists():
        result.exists = True
        return result
    plans = [
        Planned(f"{pkg}/webhooks/__init__.py", '"""Admission and conversion webhooks of this operator."""\n'),
        Planned(path, _source(project, api, defaulting, validation, spokes)),
        Planned(
            f"tests/test_{api.module}_{version}_webhook.py",
            _test_source(project, api, defaulting, validation, spokes),
        ),
    ]
    result.changes = write_planned(project.root, plans)
    _register(project, api, result)
    found = generated(project, command="create webhook")
    result.changes += write_planned(project.root, plan_manifests(project, found))
    return result


def _register(project: Project, api: ApiNames, result: WebhookResult) -> None:
    pkg = project.package
    main = project.root / pkg / "main.py"
    alias = f"{api.module}_{api.version}_webhooks"
    lines = {
        "imports": (f"from {pkg}.webhooks import {api.module}_{api.version} as {alias}", True),
        "webhooks": (f"*{alias}.WEBHOOKS,", False),
    }
    try:
        text = main.read_text()
    except FileNotFoundError:
        result.todo.append(f"{pkg}/main.py is missing: serve {alias}.WEBHOOKS with Manager(webhooks=...)")
        return
    changed = False
    for marker, (line, below) in lines.items():
        try:
            text, added = insert_at_marker(text, marker, line, below=below)
        except MarkerMissing as e:
            result.todo.append(
                f"{pkg}/main.py has no '{e.args[0]}' line: add {line!r} there by hand "
                "(and pass webhooks=Webhooks(...) to the Manager)"
            )
            continue
        changed = changed or added
    if changed:
        main.write_text(text)
    result.changes.append(Change(f"{pkg}/main.py", "updated" if changed else "unchanged"))
