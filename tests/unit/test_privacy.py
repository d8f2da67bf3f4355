"""Private names are private in fact: no package of kubeop reaches into another package's privates.

kubeop's packages (``kubeop.client``, ``kubeop.cache``, ``kubeop.kopf``, ...) talk to each other only
through public names. A leading underscore marks what a package keeps to itself: a private module
(``kubeop/client/_httpserver.py``) or a private name (``_WHERE``, ``_Refresh``). Inside one package
anything goes; across packages this test fails, naming the file, the line and the fix, when a module

- imports a private module of another package (``import kubeop.x._y``, ``from kubeop.x._y import z``,
  ``from kubeop.x import _y``),
- imports a private name of another package (``from kubeop.x.y import _z``), or
- uses an attribute with a leading underscore of an object imported from another package
  (``auth._Refresh`` after ``from kubeop.client import auth``, in a base class list or anywhere), or
- names another package's private module or name in a string (``import_module("kubeop.x._y")``).

And the other way round: a module whose docstring says it is private (its docstring starts with
"Private"/"Internal", or says "(private)", "private to kubeop" or "internal to kubeop") is named
``_x.py``, so that the underscore, not prose, is what the rules above check.

The source is parsed, never imported, so the test is quick and sees every module.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import kubeop

SRC = Path(kubeop.__file__).parent
"""``src/kubeop`` of the tree under test."""

_PRIVATE_DOCSTRING = re.compile(
    r"\A\s*(private|internal)\b|\((private|internal)\)|\b(private|internal)\s+to\s+kubeop\b", re.IGNORECASE
)
_DOTTED = re.compile(r"kubeop(\.[A-Za-z_][A-Za-z0-9_]*)+")


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    what: str
    fix: str

    @property
    def key(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"

    def __str__(self) -> str:
        return f"{self.key}\n    fix: {self.fix}"


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(module: str) -> str:
    """The top-level package of kubeop a module belongs to (``kubeop.client.auth`` -> ``client``);
    ``kubeop`` itself and its single-file modules are each their own."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    path = SRC.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None for anything but a chain of names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _check_module(path: Path) -> list[Violation]:
    module = _module_name(path)
    own = _package(module)
    rel = str(path.relative_to(SRC.parent.parent)) if SRC.parent.name == "src" else str(path)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Violation] = []
    bound: dict[str, str] = {}  # local name -> the kubeop object it names, of another package

    def other(target: str) -> bool:
        return target.split(".")[0] == "kubeop" and _package(target) != own

    def report(node: ast.stmt | ast.expr, what: str, fix: str) -> None:
        found.append(Violation(rel, node.lineno, what, fix))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not other(alias.name):
                    continue
                if any(_private(part) for part in alias.name.split(".")):
                    report(
                        node,
                        f"imports the private module {alias.name}",
                        f"import a public name of kubeop.{_package(alias.name)} instead, "
                        "or make the module public (no underscore)",
                    )
                if alias.asname:
                    bound[alias.asname] = alias.name
                else:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node, module, path.name == "__init__.py")
            if not other(target):
                continue
            where = f"kubeop.{_package(target)}"
            if any(_private(part) for part in target.split(".")):
                report(
                    node,
                    f"imports from the private module {target}",
                    f"import a public name of {where} instead, or make {target} public (no underscore)",
                )
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if _private(alias.name):
                    kind = "module" if _is_module(full) else "name"
                    report(
                        node,
                        f"imports the private {kind} {full}",
                        f"give {where} a public name for what is needed here, and import that",
                    )
                bound[alias.asname or alias.name] = full

    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = _dotted(node)
        if chain is None or chain[0] not in bound:
            continue
        for index, part in enumerate(chain[1:], start=1):
            if _private(part):
                name = ".".join([bound[chain[0]], *chain[1 : index + 1]])
                if other(name):
                    report(
                        node,
                        f"uses the private {'.'.join(chain[: index + 1])} ({name})",
                        f"give kubeop.{_package(name)} a public name for what is needed here, and use that",
                    )
                break

    for node in ast.walk(tree):  # a dotted name in a string: import_module("..."), python -m ...
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        value = node.value
        if _DOTTED.fullmatch(value) and other(value) and any(_private(part) for part in value.split(".")):
            report(
                node,
                f"names the private {value} in a string",
                f"give kubeop.{_package(value)} a public name for what is needed here, and use that",
            )

    docstring = ast.get_docstring(tree) or ""
    if _PRIVATE_DOCSTRING.search(docstring) and not _private(path.stem) and path.name != "__init__.py":
        found.append(
            Violation(
                rel,
                1,
                f"{module} says it is private in its docstring but its name is public",
                f"rename it _{path.name} (git mv) and update its importers, or reword its docstring "
                "if other packages rely on it",
            )
        )
    return found


def _violations() -> list[Violation]:
    return [v for path in sorted(SRC.rglob("*.py")) for v in _check_module(path)]


def test_no_package_reaches_into_another_packages_privates() -> None:
    found = list(_violations())
    assert not found, (
        f"{len(found)} use(s) of another package's private names (a leading underscore is the "
        "package's own business):\n" + "\n".join(map(str, found))
    )


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_checker_sees_each_kind_of_reach(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checker itself, on a small fake tree: each kind of reach is found, same-package reach is not."""
    root = tmp_path / "src" / "kubeop"
    _write(root, "__init__.py", "")
    _write(root, "a/__init__.py", "")
    _write(root, "a/_mod.py", '"""Mine."""\n_SECRET = 1\n')
    _write(root, "a/pub.py", '"""Internal helpers."""\nclass _Base: ...\n')
    _write(root, "a/_ok.py", '"""Private to kubeop: fine, it is named so."""\n')
    _write(
        root,
        "a/same.py",
        "from kubeop.a._mod import _SECRET\nfrom . import _mod\nfrom ._mod import _SECRET as S\n",
    )
    user = _write(
        root,
        "b/user.py",
        "import kubeop.a._mod\n"
        "from kubeop.a import _mod\n"
        "from kubeop.a._mod import X\n"
        "from kubeop.a.pub import _Base\n"
        "from kubeop.a import pub\n"
        "from ..a import pub as p\n"
        "class C(pub._Base): ...\n"
        "y = p._Base\n"
        "z = pub.public\n"
        "m = importlib.import_module('kubeop.a._mod')\n",
    )
    _write(root, "b/__init__.py", "")
    monkeypatch.setattr(sys.modules[__name__], "SRC", root)
    whats = [v.what for v in _check_module(user)]
    assert whats == [
        "imports the private module kubeop.a._mod",
        "imports the private module kubeop.a._mod",
        "imports from the private module kubeop.a._mod",
        "imports the private name kubeop.a.pub._Base",
        "uses the private pub._Base (kubeop.a.pub._Base)",
        "uses the private p._Base (kubeop.a.pub._Base)",
        "names the private kubeop.a._mod in a string",
    ]
    assert _check_module(root / "a" / "same.py") == []
    assert _check_module(root / "a" / "_ok.py") == []
    assert [v.what for v in _check_module(root / "a" / "pub.py")] == [
        "kubeop.a.pub says it is private in its docstring but its name is public"
    ]
