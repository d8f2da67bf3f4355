"""Writes kubeop.kinds from the pinned Kubernetes version's OpenAPI v3 documents.

    python -m kubeop.kinds._generate [--spec DIR] [--check]

``DIR`` holds the per-group-version documents (``api__v1_openapi.json``, ``apis__apps__v1_openapi.json``,
...): by default ``api/openapi-spec/v3`` of the pinned kubernetes module in the Go module cache (the
one the control-plane binaries are built from). ``--check`` writes nothing and exits 1 when the
committed modules differ from what the documents give (tests/unit/kinds runs the same comparison).

Only the schemas the chosen kinds reach are generated, one module per API group version.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubeop.binaries import KUBERNETES_VERSION

# (group, version, kind): the built-in kinds operators read and write most.
KINDS: tuple[tuple[str, str, str], ...] = (
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("", "v1", "Service"),
    ("", "v1", "Pod"),
    ("", "v1", "PersistentVolumeClaim"),
    ("", "v1", "PersistentVolume"),
    ("", "v1", "Namespace"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "Endpoints"),
    ("", "v1", "Event"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "StatefulSet"),
    ("apps", "v1", "DaemonSet"),
    ("apps", "v1", "ReplicaSet"),
    ("batch", "v1", "Job"),
    ("batch", "v1", "CronJob"),
    ("rbac.authorization.k8s.io", "v1", "Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    ("networking.k8s.io", "v1", "Ingress"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("coordination.k8s.io", "v1", "Lease"),
    ("events.k8s.io", "v1", "Event"),
    ("policy", "v1", "PodDisruptionBudget"),
    ("storage.k8s.io", "v1", "StorageClass"),
)

#: Kinds two group versions define, and the module whose class the package-level name is. Event:
#: events.k8s.io/v1, the API kubeop's EventRecorder writes; core/v1's stays in its module
#: (``from kubeop.kinds.core_v1 import Event``).
PACKAGE_LEVEL = {"Event": "events_v1"}

_REF = "#/components/schemas/"
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# Schemas that become scalar aliases from kubeop.kinds._base instead of classes.
_SCALARS = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    _META + "Time": "Time",
    _META + "MicroTime": "Time",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "dict[str, Any]",
    _META + "FieldsV1": "dict[str, Any]",
}
_BASE_ATTRS = {"model_config", "model_fields", "copy", "dict", "json", "schema", "validate", "construct"}
PACKAGE = Path(__file__).resolve().parent


def _go_mod_cache() -> str:
    """Where Go keeps modules: $GOMODCACHE, else what ``go env`` says, else Go's default."""
    if os.environ.get("GOMODCACHE"):
        return os.environ["GOMODCACHE"]
    go = shutil.which("go")
    if go is not None:
        try:
            out = subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            out = None
        if out is not None and out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return str(Path.home() / "go" / "pkg" / "mod")


def default_spec_dir() -> Path:
    cache = _go_mod_cache()
    return Path(cache) / "k8s.io" / f"kubernetes@{KUBERNETES_VERSION}" / "api" / "openapi-spec" / "v3"


def group_file(group: str, version: str) -> str:
    return f"api__{version}_openapi.json" if not group else f"apis__{group}__{version}_openapi.json"


def module_of(group: str, version: str) -> str:
    return f"{(group or 'core').split('.')[0]}_{version}"


def snake(name: str) -> str:
    """``podIPs`` -> ``pod_ips``, ``hostIPC`` -> ``host_ipc``, ``from`` -> ``from_``."""
    words = re.findall(r"[A-Z]{2,}s(?![a-z])|[A-Z]+(?=[A-Z][a-z]|\d|$)|[A-Z]?[a-z]+|[A-Z]+|\d+", name)
    out = "_".join(w.lower() for w in words) if words else name
    if not out.isidentifier():
        out = re.sub(r"\W", "_", out).strip("_")
    if keyword.iskeyword(out) or out in _BASE_ATTRS or out.startswith("model_"):
        out += "_"
    return out


def _camel(attribute: str) -> str:
    head, *rest = attribute.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class Generator:
    def __init__(self, spec_dir: Path) -> None:
        if not spec_dir.is_dir():
            raise SystemExit(
                f"no OpenAPI v3 documents at {spec_dir}: fetch the kubernetes {KUBERNETES_VERSION} module "
                "(go mod download k8s.io/kubernetes@" + KUBERNETES_VERSION + ") or pass --spec DIR"
            )
        self.schemas: dict[str, Any] = {}
        self.paths: dict[str, Any] = {}
        for group, version in sorted({(g, v) for g, v, _ in KINDS}):
            doc = json.loads((spec_dir / group_file(group, version)).read_text())
            self.schemas.update(doc["components"]["schemas"])
            self.paths.update(doc["paths"])
        # schema name -> (module, class name)
        self.classes: dict[str, tuple[str, str]] = {}
        self.kinds: dict[str, tuple[str, str, str]] = {}  # schema name -> gvk
        self.wire_names: dict[str, str] = {}

    # -- what to generate ------------------------------------------------------------------------
    def schema_of(self, group: str, version: str, kind: str) -> str:
        for name, schema in self.schemas.items():
            for gvk in schema.get("x-kubernetes-group-version-kind") or ():
                if (gvk.get("group", ""), gvk.get("version"), gvk.get("kind")) == (group, version, kind):
                    return name
        raise SystemExit(f"the documents declare no {group}/{version} {kind}")

    def placement(self, name: str) -> tuple[str, str]:
        m = re.fullmatch(r"io\.k8s\.api\.([a-z0-9]+)\.(v[a-z0-9]+)\.(\w+)", name)
        if m:
            return f"{m[1]}_{m[2]}", m[3]
        if name.startswith(_META):
            return "meta_v1", name[len(_META) :]
        raise SystemExit(f"do not know which module {name} belongs in")

    def collect(self) -> None:
        todo = []
        for group, version, kind in KINDS:
            name = self.schema_of(group, version, kind)
            self.kinds[name] = (group, version, kind)
            todo.append(name)
        while todo:
            name = todo.pop()
            if name in self.classes or name in _SCALARS:
                continue
            self.classes[name] = self.placement(name)
            for sub in (self.schemas[name].get("properties") or {}).values():
                todo.extend(self._refs(sub))

    def _refs(self, schema: Mapping[str, Any]) -> list[str]:
        found = []
        ref = schema.get("$ref")
        if ref:
            found.append(ref[len(_REF) :])
        for key in ("allOf", "oneOf", "anyOf"):
            for part in schema.get(key) or ():
                found.extend(self._refs(part))
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), Mapping):
                found.extend(self._refs(schema[key]))
        return [f for f in found if (self.schemas.get(f) or {}).get("properties") or f in self.kinds]

    # -- types -----------------------------------------------------------------------------------
    def type_of(self, schema: Mapping[str, Any], module: str, imports: set[str]) -> str:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return "Any"
        if schema.get("format") == "int-or-string":
            imports.add("IntOrString")
            return "IntOrString"
        ref = schema.get("$ref")
        parts: list[Any] = list(schema.get("allOf") or ())
        if ref is None and len(parts) == 1 and "$ref" in parts[0]:
            ref = parts[0]["$ref"]
        if ref is not None:
            return self.ref_type(ref[len(_REF) :], module, imports)
        kind = schema.get("type")
        if kind == "string":
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "array":
            return f"list[{self.type_of(schema.get('items') or {}, module, imports)}]"
        if kind == "object":
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping):
                return f"dict[str, {self.type_of(extra, module, imports)}]"
            if schema.get("properties"):
                raise SystemExit(f"inline object schemas are not supported: {schema}")
            return "dict[str, Any]"
        return "Any"

    def ref_type(self, name: str, module: str, imports: set[str]) -> str:
        if name in _SCALARS:
            alias = _SCALARS[name]
            if not alias.startswith("dict"):
                imports.add(alias)
            return alias
        if name not in self.classes:
            return self.type_of(self.schemas[name], module, imports)
        target, cls = self.classes[name]
        if target == module:
            return cls
        imports.add(f"module:{target}")
        return f"{target}.{cls}"

    # -- output ----------------------------------------------------------------------------------
    def resource_of(self, name: str) -> str:
        group, version, kind = self.kinds[name]
        candidates = []
        for path, item in self.paths.items():
            get = item.get("get") or {}
            gvk = get.get("x-kubernetes-group-version-kind") or {}
            declared = (gvk.get("group", ""), gvk.get("version"), gvk.get("kind"))
            if declared == (group, version, kind) and get.get("x-kubernetes-action") == "get":
                candidates.append(path)
        plain = [p for p in candidates if p.endswith("/{name}")]
        if len(plain) != 1:
            raise SystemExit(f"expected one read path for {kind}, found {plain}")
        path = plain[0]
        plural = path.split("/")[-2]
        namespaced = "{namespace}" in path
        tails = (p[len(path) + 1 :] for p in self.paths if p.startswith(path + "/"))
        subresources = sorted({t for t in tails if t and "/" not in t})
        args = [repr(group), repr(version), repr(plural), f"kind={kind!r}"]
        if not namespaced:
            args.append("namespaced=False")
        if subresources:
            args.append(f"subresources={tuple(subresources)!r}")
        return f"ApiResource({', '.join(args)})"

    def field_name(self, prop: str) -> str:
        attr = snake(prop)
        if _camel(attr) != prop:
            seen = self.wire_names.setdefault(attr, prop)
            if seen != prop:
                raise SystemExit(f"{prop!r} and {seen!r} both become the attribute {attr!r}")
        return attr

    def module_text(self, module: str) -> str:
        names = sorted((cls, name) for name, (mod, cls) in self.classes.items() if mod == module)
        imports: set[str] = set()
        body: list[str] = []
        for cls, name in names:
            schema = self.schemas[name]
            is_kind = name in self.kinds
            base = "KubeObject" if is_kind else "KubeStruct"
            body.append("")
            body.append("")
            body.append(f"class {cls}({base}):")
            body.append(_docstring(_summary(schema.get("description") or cls), "    "))
            body.append("")
            if is_kind:
                group, version, kind = self.kinds[name]
                api_version = f"{group}/{version}" if group else version
                body.append(f"    api_version: ClassVar[str] = {api_version!r}")
                body.append(f"    kind: ClassVar[str] = {kind!r}")
                body.append(f"    resource: ClassVar[ApiResource] = {self.resource_of(name)}")
                body.append("")
            required = set(schema.get("required") or ())
            props = schema.get("properties") or {}
            for prop in sorted(props, key=lambda p: (p not in required, p)):
                if is_kind and prop in ("apiVersion", "kind"):
                    continue
                attr = self.field_name(prop)
                annotation = self.type_of(props[prop], module, imports)
                if is_kind and prop == "metadata":
                    meta = "ObjectMeta" if module == "meta_v1" else "meta_v1.ObjectMeta"
                    imports.add("Field")
                    body.append(f"    metadata: {meta} = Field(default_factory={meta})")
                elif prop in required:
                    body.append(f"    {attr}: {annotation}")
                else:
                    body.append(f"    {attr}: {annotation} | None = None")
            if not props:
                body.append("    pass")
        group_version = module.replace("_", "/")
        head = [
            f'"""{group_version} models, generated by kubeop.kinds._generate from the Kubernetes',
            f'{KUBERNETES_VERSION} OpenAPI v3 documents. Do not edit."""',
            "",
            "from __future__ import annotations",
            "",
        ]
        typing = ["Any"] if "Any" in "\n".join(body) else []
        if any(name in self.kinds for _, name in names):
            typing.append("ClassVar")
        if typing:
            head.append(f"from typing import {', '.join(sorted(typing))}")
            head.append("")
        if "Field" in imports:
            head.append("from pydantic import Field")
            head.append("")
        if any(name in self.kinds for _, name in names):
            head.append("from kubeop.core.resource import ApiResource")
        modules = sorted(i.split(":", 1)[1] for i in imports if i.startswith("module:"))
        if modules:
            head.append(f"from kubeop.kinds import {', '.join(modules)}")
        scalars = sorted(i for i in imports if i in ("Quantity", "IntOrString", "Time"))
        bases = sorted({"KubeObject" if n in self.kinds else "KubeStruct" for _, n in names})
        head.append(f"from kubeop.kinds._base import {', '.join(sorted(bases + scalars))}")
        exported = [cls for cls, _ in names]
        head.append("")
        head.append("__all__ = [" + ", ".join(f'"{c}"' for c in exported) + "]")
        return "\n".join(head + body) + "\n"

    def init_text(self) -> str:
        where: dict[str, str] = {}
        for name in self.kinds:
            module, cls = self.classes[name]
            if cls in PACKAGE_LEVEL and module != PACKAGE_LEVEL[cls]:
                continue
            where[cls] = module
        modules = sorted({m for m, _ in self.classes.values()})
        lines = [
            '"""Typed models of the built-in kinds: ``from kubeop.kinds import Deployment, Pod, Secret``.',
            "",
            "Each kind is a pydantic model and a resource handle for every client verb",
            "(``await ctx.client.get(Deployment, name, namespace=ns)`` returns a Deployment). Attributes",
            "are snake_case with the API's camelCase names as aliases; fields the models do not know are",
            "kept, so an object survives a read and a write unchanged. One module per API group version,",
            "each loaded on first use: an operator that uses no kind pays nothing. ``Event`` is",
            "events.k8s.io/v1's (core/v1's is ``kubeop.kinds.core_v1.Event``). The modules:",
            *textwrap.wrap(", ".join(modules) + ".", 100),
            "",
            "Generated by kubeop.kinds._generate from the Kubernetes "
            f"{KUBERNETES_VERSION} OpenAPI v3 documents. Do not edit.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from importlib import import_module",
            "from typing import TYPE_CHECKING, Any",
            "",
            "if TYPE_CHECKING:",
        ]
        for module in modules:
            names = sorted(c for c, m in where.items() if m == module)
            if names:
                lines.append(f"    from kubeop.kinds.{module} import {', '.join(names)}")
        lines.append("")
        lines.append("_WHERE = {")
        lines.extend(f'    "{c}": "{where[c]}",' for c in sorted(where))
        lines.append("}")
        lines.append("MODULES = (" + ", ".join(f'"{m}"' for m in modules) + ",)")
        lines.append("")
        lines.append("__all__ = [" + ", ".join(f'"{c}"' for c in sorted(where)) + "]")
        lines.append(
            """

def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])"""
        )
        return "\n".join(lines) + "\n"

    def aliases_text(self) -> str:
        lines = [
            '"""Attributes whose wire name is not their plain camelCase (``pod_ips`` is ``podIPs``).',
            "",
            'Generated by kubeop.kinds._generate. Do not edit."""',
            "",
            "WIRE_NAMES: dict[str, str] = {",
        ]
        lines.extend(f'    "{a}": "{w}",' for a, w in sorted(self.wire_names.items()))
        lines.append("}")
        return "\n".join(lines) + "\n"

    def files(self) -> dict[str, str]:
        self.collect()
        out = {f"{m}.py": self.module_text(m) for m in sorted({m for m, _ in self.classes.values()})}
        out["__init__.py"] = self.init_text()
        out["_aliases.py"] = self.aliases_text()
        return out


def _docstring(text: str, indent: str) -> str:
    lines = textwrap.wrap(text, 104 - len(indent))
    if len(lines) == 1 and len(lines[0]) + len(indent) + 6 <= 110:
        return f'{indent}"""{lines[0]}"""'
    return "\n".join([f'{indent}"""{lines[0]}', *(indent + line for line in lines[1:]), f'{indent}"""'])


def _summary(description: str) -> str:
    text = " ".join(description.split())
    first = re.split(r"(?<=[a-z0-9)])\. ", text, maxsplit=1)[0].rstrip(".")
    if len(first) > 200:
        first = first[:197].rsplit(" ", 1)[0] + "..."
    return first.replace("\\", "\\\\").replace('"""', "'''") + "."


def generate(spec_dir: Path | None = None) -> dict[str, str]:
    """The package's generated files (name -> text), formatted as committed."""
    files = Generator(spec_dir or default_spec_dir()).files()
    return {name: _format(text) for name, text in files.items()}


def _format(text: str) -> str:
    import subprocess

    ruff = Path(sys.executable).with_name("ruff")
    done = subprocess.run(
        [str(ruff) if ruff.exists() else "ruff", "format", "--stdin-filename", str(PACKAGE / "x.py"), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spec", type=Path, default=None, help="directory of OpenAPI v3 documents")
    parser.add_argument("--check", action="store_true", help="compare with the committed modules")
    args = parser.parse_args(argv)
    files = generate(args.spec)
    stale = [
        n for n, text in files.items() if not (PACKAGE / n).exists() or (PACKAGE / n).read_text() != text
    ]
    if args.check:
        for name in stale:
            print(f"kubeop/kinds/{name} differs from the generator's output", file=sys.stderr)
        return 1 if stale else 0
    for name in stale:
        (PACKAGE / name).write_text(files[name])
        print(f"wrote kubeop/kinds/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
