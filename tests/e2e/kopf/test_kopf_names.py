"""Every name of kopf 1.45.2's ``kopf.__all__`` exists in ``kubeop.kopf``.

``__all__`` is read from ``kopf/__init__.py`` in kopf's sdist (fetched at test time, pinned by
sha256: :mod:`.sdist`) with :mod:`ast`; kopf itself is never imported. A name kubeop.kopf
deliberately does not support still exists and raises a clear error where it is used (tested
in tests/unit/kopf/test_kopf_api.py). No control plane is needed.
"""

from __future__ import annotations

import ast
import tarfile

import kubeop.kopf
from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist

# Names kopf has that kubeop.kopf does not have yet. Remove a name when it lands (the test fails
# while a landed name is still listed).
PENDING: set[str] = set()


def kopf_all() -> list[str]:
    """``kopf.__all__`` of the pinned sdist, parsed, not imported."""
    with tarfile.open(kopf_sdist()) as tar:
        member = tar.extractfile(f"kopf-{KOPF_VERSION}/kopf/__init__.py")
        assert member is not None
        tree = ast.parse(member.read().decode())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list | tuple)
            return [str(name) for name in value]
    raise AssertionError("kopf/__init__.py has no __all__")


def test_kubeop_kopf_has_every_name_of_kopf() -> None:
    names = kopf_all()
    assert len(names) == 108, f"kopf {KOPF_VERSION}'s __all__ has {len(names)} names, expected 108"
    missing = sorted(n for n in names if not hasattr(kubeop.kopf, n) and n not in PENDING)
    assert not missing, f"kubeop.kopf lacks {len(missing)} of kopf's {len(names)} names: {missing}"
    exported = set(kubeop.kopf.__all__)
    unexported = sorted(n for n in names if n not in exported and n not in PENDING)
    assert not unexported, f"kubeop.kopf.__all__ lacks {unexported}"
    landed = sorted(n for n in PENDING if hasattr(kubeop.kopf, n))
    assert not landed, f"{landed} exist now: remove them from PENDING"
    present = sum(hasattr(kubeop.kopf, n) for n in names)
    print(f"kubeop.kopf has {present}/{len(names)} of kopf {KOPF_VERSION}'s names")
