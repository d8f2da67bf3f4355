"""Real kopf at the pinned version, installed into a venv of its own at test time.

The venv (``~/.cache/kubeop/kopf-venv-1.45.2``) gets kopf from the same hash-checked sdist the
peer tests read (:func:`tests.e2e.kopf.sdist.kopf_sdist`), its dependencies from the package
index as ``python -m pip install`` resolves them; a marker with the sdist's sha256 says it is
complete, so an interrupted install is redone.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.kopf.sdist import CACHE, KOPF_SDIST_SHA256, KOPF_VERSION, kopf_sdist

VENV = CACHE.parent / f"kopf-venv-{KOPF_VERSION}"


def real_kopf_python() -> Path:
    """The python of a venv where ``import kopf`` is kopf 1.45.2 (installed once)."""
    python = VENV / "bin" / "python"
    marker = VENV / "kopf-sdist.sha256"
    if marker.exists() and marker.read_text().strip() == KOPF_SDIST_SHA256 and python.exists():
        return python
    sdist = kopf_sdist()
    steps = (
        [sys.executable, "-m", "venv", "--clear", str(VENV)],
        [str(python), "-m", "pip", "install", "-q", str(sdist)],
    )
    for step in steps:
        proc = subprocess.run(step, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(step)} failed: {proc.stderr[-2000:]}"
    check = subprocess.run(
        [str(python), "-c", "import kopf, importlib.metadata as m; print(m.version('kopf'))"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.stdout.strip() == KOPF_VERSION, f"kopf in {VENV}: {check.stdout} {check.stderr[-2000:]}"
    marker.write_text(KOPF_SDIST_SHA256)
    return python
