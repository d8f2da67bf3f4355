"""kopf's OWN unit tests of its progress and diff-base storages, run against kubeop.kopf.

From kopf 1.45.2's sdist (fetched at test time, pinned by sha256: :mod:`.sdist`), the files of
:data:`FILES` (kopf's tests/persistence/: annotation names and their hashing, essences, storing
of the diff-base and of the progress) are unpacked into a temporary directory with kopf's module
paths of the storages and of the body/patch types pointed at kubeop.kopf's (:data:`MODULES`),
and run by pytest in a subprocess; no control plane is needed. All of them pass.

Not run from that directory: test_states.py, test_outcomes.py and test_iso8601_times.py test
kopf's internal ``State``/``Outcome`` classes of its handling cycle (kubeop.kopf has its own).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist

FILES = (
    "tests/persistence/test_annotations_hashing.py",
    "tests/persistence/test_essences.py",
    "tests/persistence/test_storing_of_diffbase.py",
    "tests/persistence/test_storing_of_progress.py",
)
MODULES = (
    ("kopf._cogs.configs.conventions", "kubeop.kopf.storagekeys"),
    ("kopf._cogs.configs.diffbase", "kubeop.kopf.diffbase"),
    ("kopf._cogs.configs.progress", "kubeop.kopf.progress"),
    ("kopf._cogs.structs.bodies", "kubeop.kopf.bodies"),
    ("kopf._cogs.structs.patches", "kubeop.kopf.bodies"),
    ("kopf._cogs.structs.ids", "kubeop.kopf.handlers"),
    ("kopf._cogs.structs.dicts", "kubeop.kopf.diffs"),
)


def test_kopfs_persistence_tests_pass_on_kubeop_kopf(tmp_path: Path) -> None:
    prefix = f"kopf-{KOPF_VERSION}/"
    with tarfile.open(kopf_sdist()) as tar:
        for name in FILES:
            member = tar.extractfile(prefix + name)
            assert member is not None, f"{name} is not in kopf's sdist"
            source = member.read().decode()
            for theirs, ours in MODULES:
                source = re.sub(rf"\bfrom {re.escape(theirs)} import ", f"from {ours} import ", source)
            assert "kopf._" not in source, f"{name} still imports kopf's internals"
            (tmp_path / Path(name).name).write_text(source)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-W",
            "ignore::DeprecationWarning",
            ".",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-2000:]
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert re.match(r"326 passed\b", summary) and "failed" not in summary, summary
