"""The kind the fuzzed-spec scenario (test_fuzz_specs.py) throws values at, and its reconciler's
rules. A model with a little of everything a CRD schema can say: bounds, lengths, a pattern,
enums, a format, a list-map, a bounded map, a nullable list, defaults and a CEL rule."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from kubeop.crd import CamelModel, CustomResource, Format, ListType, ValidationRule

GROUP = "fuzz.kubeop.dev"


class Port(CamelModel):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]*$", max_length=15)
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"


@ValidationRule(
    "self.minReplicas <= self.replicas",
    message="minReplicas must not exceed replicas",
    field_path=".minReplicas",
)
class GadgetSpec(CamelModel):
    image: str = Field(min_length=1, max_length=64)
    replicas: int = Field(default=1, ge=0, le=10)
    min_replicas: int = Field(default=0, ge=0, le=10)
    mode: Literal["fast", "safe", "fail"] = "safe"
    ratio: float = Field(default=0.5, ge=0.0, lt=1.0)
    host: Annotated[str, Format("hostname")] | None = None
    ports: Annotated[list[Port], ListType("map", ("name",))] = Field(default_factory=list, max_length=4)
    labels: dict[str, Annotated[str, Field(max_length=20)]] = Field(default_factory=dict, max_length=5)
    tags: list[Annotated[str, Field(max_length=8)]] | None = Field(default=None, max_length=3)


class GadgetStatus(CamelModel):
    observed_generation: int | None = None
    phase: str | None = None


class Gadget(CustomResource, group=GROUP, version="v1", subresources=["status"]):
    spec: GadgetSpec
    status: GadgetStatus | None = None


#: Python versions of the schema's CEL rules, for the strategies (evaluated after defaulting).
RULES = {"self.minReplicas <= self.replicas": lambda spec: spec["minReplicas"] <= spec["replicas"]}

#: The reconciler fails (and must back off) on ``mode: fail``, and gives up (TerminalError) on
#: this many replicas.
TERMINAL_REPLICAS = 7
