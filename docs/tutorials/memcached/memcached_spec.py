"""The spec of the Memcached tutorial's kind (docs/tutorials/memcached.md): it replaces the
``MemcachedSpec`` class ``kubeop create api`` writes in memcached_operator/api/v1/memcached.py
(tests/e2e/cli/test_tutorial_e2e.py does exactly that), with ``Format`` added to the file's
``from kubeop import ...`` line."""

from __future__ import annotations

from typing import Annotated

from kubeop import CamelModel, Format
from pydantic import Field


# --8<-- [start:spec] (to the end of the file)
class MemcachedSpec(CamelModel):
    """The desired state of a Memcached."""

    size: Annotated[int, Format("int32")] = Field(
        default=1, ge=1, le=5, description="How many memcached Pods to run."
    )
