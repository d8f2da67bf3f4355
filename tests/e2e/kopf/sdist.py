"""kopf's source distribution at a pinned version, fetched at test time and never kept in the repo.

``pip download kopf==1.45.2 --no-deps --no-binary :all:`` from the package index into a cache,
checked against its sha256 before any use; its ``examples/`` and ``tests/e2e`` are what the
peer tests run with the import changed to ``kubeop.kopf``.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

KOPF_VERSION = "1.45.2"
KOPF_SDIST_SHA256 = "5baa180cfdebe1c5095d2a0a96d7d91825b6920541a0825c55719c36abb0054f"
PIP_DOWNLOAD = (sys.executable, "-m", "pip", "download")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kubeop" / "kopf-sdist"


def kopf_sdist() -> Path:
    """The pinned sdist (downloaded once into the cache), its hash checked."""
    sdist = CACHE / f"kopf-{KOPF_VERSION}.tar.gz"
    if not sdist.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [*PIP_DOWNLOAD, f"kopf=={KOPF_VERSION}", "--no-deps", "--no-binary", ":all:", "-d", str(CACHE)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0 and sdist.exists(), f"could not fetch kopf's sdist: {proc.stderr[-2000:]}"
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    assert digest == KOPF_SDIST_SHA256, f"{sdist} has sha256 {digest}, pinned {KOPF_SDIST_SHA256}"
    return sdist


# The only change made to kopf's files: where ``kopf`` comes from.
IMPORTS = (
    (re.compile(r"^import kopf\.testing$", re.M), "import kubeop.kopf as kopf\nimport kubeop.kopf.testing"),
    (re.compile(r"^import kopf$", re.M), "import kubeop.kopf as kopf"),
    (re.compile(r"^from kopf\.testing import ", re.M), "from kubeop.kopf.testing import "),
)


def rewrite_imports(source: str) -> tuple[str, int]:
    """``source`` with kopf's imports pointed at kubeop.kopf, and how many lines changed."""
    total = 0
    for pattern, replacement in IMPORTS:
        source, n = pattern.subn(replacement, source)
        total += n
    return source, total
