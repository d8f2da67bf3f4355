"""kopf's storages of the handling state, by the names kopf exports: each handler's progress
(:mod:`kubeop.kopf.progress`) and the essence last handled (:mod:`kubeop.kopf.diffbase`), in
kopf 1.45.2's formats; ``settings.persistence`` selects them (:mod:`kubeop.kopf.state`)."""

from __future__ import annotations

from kubeop.kopf.diffbase import (
    AnnotationsDiffBaseStorage,
    DiffBaseStorage,
    MultiDiffBaseStorage,
    StatusDiffBaseStorage,
)
from kubeop.kopf.progress import (
    AnnotationsProgressStorage,
    MultiProgressStorage,
    ProgressRecord,
    ProgressStorage,
    SmartProgressStorage,
    StatusProgressStorage,
)

__all__ = [
    "AnnotationsDiffBaseStorage",
    "AnnotationsProgressStorage",
    "DiffBaseStorage",
    "MultiDiffBaseStorage",
    "MultiProgressStorage",
    "ProgressRecord",
    "ProgressStorage",
    "SmartProgressStorage",
    "StatusDiffBaseStorage",
    "StatusProgressStorage",
]
