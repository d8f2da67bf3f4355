"""kopf's OWN unit tests of its public helpers, run against kubeop.kopf with only the import changed.

From kopf 1.45.2's sdist (fetched at test time, pinned by sha256: :mod:`.sdist`): the files of
:data:`FILES` are unpacked into a temporary directory, ``import kopf`` becomes ``import
kubeop.kopf as kopf`` (:func:`~.sdist.rewrite_imports`), and ``from kopf._cogs.structs.bodies
import ...`` (the body types the hierarchy tests build their inputs with) becomes ``from
kubeop.kopf.bodies import ...``. kopf's top-level ``tests/conftest.py`` imports kopf's internals,
so the three fixtures these files use from it (``pykube``, ``kubernetes``, ``kubernetes_asyncio``:
the library, or a skip without it) come from :data:`CONFTEST`; the directories' own conftests
come from the sdist. pytest runs them in a subprocess; no control plane is needed.

Per file (kubernetes/kubernetes_asyncio installed: the model cases run; without them they skip):

=====================================  ==================  ==========================================
file                                   result              why not all
=====================================  ==================  ==========================================
hierarchies/test_labelling.py          all pass
hierarchies/test_name_harmonizing.py   all pass
hierarchies/test_namespace_adjusting   all pass
hierarchies/test_owner_referencing.py  all but 16 pass     test_adopting patches kopf's module
                                                           kopf._kits.hierarchies with pytest-mock
hierarchies/test_type_validation.py    all pass
hierarchies/test_contextual_owner.py   not collected       builds kopf's internal causes and sets
                                                           kopf._core...cause_var
lifecycles/test_global_defaults.py     all pass
lifecycles/test_handler_selection.py   not collected       kopf's internal State and Outcome
lifecycles/test_real_invocation.py     not collected       kopf's internal causes and indexers
test_filtering_helpers.py              all pass
settings/test_defaults.py              all pass
basic-structs/test_resource.py         all pass
=====================================  ==================  ==========================================
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist, rewrite_imports

FILES = (
    "tests/hierarchies/",
    "tests/lifecycles/",
    "tests/test_filtering_helpers.py",
    "tests/settings/test_defaults.py",
    "tests/basic-structs/test_resource.py",
)
BODIES = (re.compile(r"^from kopf\._cogs\.structs\.bodies import ", re.M), "from kubeop.kopf.bodies import ")
# kopf.Resource's tests import it from where kopf defines it.
REFERENCES = (
    re.compile(r"^from kopf\._cogs\.structs\.references import Resource$", re.M),
    "from kubeop.kopf import Resource",
)

# Tests that cannot run on kubeop.kopf, by file: what they need of kopf that is not its API.
NOT_RUNNABLE = {
    "tests/hierarchies/test_contextual_owner.py": "kopf's internal causes and cause_var",
    "tests/lifecycles/test_handler_selection.py": "kopf's internal State and Outcome",
    "tests/lifecycles/test_real_invocation.py": "kopf's internal causes and indexers",
}
NOT_RUNNABLE_TESTS = {
    "tests/hierarchies/test_owner_referencing.py::test_adopting": "patches kopf._kits.hierarchies (mocker)",
}

CONFTEST = """
import pytest


def _module(name):
    return pytest.importorskip(name)


@pytest.fixture(params=[True], ids=["with-pykube"])
def pykube():
    return _module("pykube")


@pytest.fixture(params=[True], ids=["with-client"])
def kubernetes():
    return _module("kubernetes")


@pytest.fixture(params=[True], ids=["with-async-client"])
def kubernetes_asyncio():
    return _module("kubernetes_asyncio")
"""


def unpack(into: Path) -> int:
    """The files of :data:`FILES` under ``into``, imports rewritten; how many lines changed."""
    prefix = f"kopf-{KOPF_VERSION}/"
    changed = 0
    with tarfile.open(kopf_sdist()) as tar:
        for member in tar.getmembers():
            name = member.name.removeprefix(prefix)
            if not member.isfile() or not name.endswith(".py"):
                continue
            if not any(name == f or (f.endswith("/") and name.startswith(f)) for f in FILES):
                continue
            data = tar.extractfile(member)
            assert data is not None
            source, n = rewrite_imports(data.read().decode())
            source, m = BODIES[0].subn(BODIES[1], source)
            source, k = REFERENCES[0].subn(REFERENCES[1], source)
            changed += n + m + k
            target = into / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source)
    (into / "tests" / "conftest.py").write_text(CONFTEST)
    return changed


def test_kopf_api_unit_tests_pass_on_kubeop_kopf(tmp_path: Path) -> None:
    changed = unpack(tmp_path)
    assert changed > 0
    report = tmp_path / "report.xml"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "--continue-on-collection-errors",
            f"--junitxml={report}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    unexpected = []
    for case in ET.parse(report).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        if not classname:  # a file that could not be collected
            classname, name = name, ""
        path = classname.replace(".", "/") + ".py"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
        counts[path][outcome] += 1
        if outcome in ("failed", "error"):
            base = name.split("[")[0]
            known = path in NOT_RUNNABLE or f"{path}::{base}" in NOT_RUNNABLE_TESTS
            if not known:
                unexpected.append(f"{path}::{name}")
    table = "\n".join(f"{path}: {dict(c)}" for path, c in sorted(counts.items()))
    print(table)
    assert sum(c["passed"] for c in counts.values()) >= 500, table + proc.stdout[-3000:]
    assert not unexpected, f"kopf's tests failing on kubeop.kopf: {unexpected}\n{proc.stdout[-5000:]}"
