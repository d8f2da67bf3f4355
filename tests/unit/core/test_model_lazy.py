"""from_dict(..., lazy=True): a model of trusted server data that is validated on first use, and is
then indistinguishable from one built at once."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from kubeop.core.model import ModelMismatch, from_dict, is_model_class, to_dict
from kubeop.crd import CamelModel, CustomResource
from kubeop.kinds import ConfigMap


class GizmoSpec(CamelModel):
    model_config = ConfigDict(extra="forbid")
    size: int
    colour_name: str = "red"


class Gizmo(CustomResource, group="lazy.kubeop.dev", version="v1"):
    spec: GizmoSpec
    status: dict[str, Any] | None = None


def _gizmo(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "lazy.kubeop.dev/v1",
        "kind": "Gizmo",
        "metadata": {
            "name": "g",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "7",
            "labels": {"a": "b"},
        },
        "spec": spec,
    }


CM = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "c",
        "namespace": "ns",
        "resourceVersion": "9",
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Gizmo", "name": "g", "uid": "u1", "controller": True}
        ],
    },
    "data": {"k": "v"},
    "someNewField": {"kept": True},
}


@pytest.mark.parametrize(("cls", "data"), [(Gizmo, _gizmo(size=3, colourName="blue")), (ConfigMap, CM)])
def test_a_lazy_model_is_the_eager_one_once_used(cls: type[BaseModel], data: dict[str, Any]) -> None:
    eager = from_dict(cls, data)
    lazy = from_dict(cls, data, lazy=True)
    assert isinstance(lazy, cls) and type(lazy) is not cls  # not built yet
    assert lazy == eager and type(lazy) is cls  # built by the comparison, now a plain instance
    assert lazy.model_fields_set == eager.model_fields_set
    assert lazy.__pydantic_extra__ == eager.__pydantic_extra__
    # Every way of using one builds it first: dumps, repr, copies, pickling, the client's to_dict.
    for use in (
        lambda m: m.model_dump(mode="json", by_alias=True, exclude_none=True),
        repr,
        lambda m: copy.deepcopy(m).model_dump(),
        lambda m: copy.copy(m).model_dump(),
        lambda m: m.model_copy(update={"metadata": None}).model_dump(),
        lambda m: pickle.loads(pickle.dumps(m)).model_dump(),
        to_dict,
        lambda m: m.metadata.name,
    ):
        assert use(from_dict(cls, data, lazy=True)) == use(eager)


def test_a_lazy_model_inside_another_model_dumps_as_itself() -> None:
    class Holder(BaseModel):
        item: ConfigMap

    eager = from_dict(ConfigMap, CM)
    holder = Holder.model_construct(item=from_dict(ConfigMap, CM, lazy=True))
    assert holder.model_dump()["item"] == eager.model_dump()


def test_a_lazy_model_is_a_copy_of_its_source() -> None:
    data = _gizmo(size=1)
    lazy = from_dict(Gizmo, data, lazy=True)
    lazy.metadata.labels["a"] = "changed"  # type: ignore[index]
    lazy.spec.size = 2
    assert data["metadata"]["labels"] == {"a": "b"} and data["spec"] == {"size": 1}
    again = from_dict(Gizmo, data, lazy=True)
    assert again.spec.size == 1 and again is not lazy


def test_a_lazy_model_that_does_not_fit_raises_model_mismatch_at_each_use() -> None:
    lazy = from_dict(Gizmo, _gizmo(colourName="blue"), lazy=True)  # no error yet: nothing read
    for _ in range(2):
        with pytest.raises(
            ModelMismatch, match=r"Gizmo ns/g does not fit the model Gizmo: spec\.size: Field required"
        ):
            _ = lazy.spec
    assert type(lazy) is not Gizmo  # still unbuilt


def test_lazy_applies_to_pydantic_models_only() -> None:
    class Plain:
        api_version = "v1"
        kind = "Plain"

        def __init__(self, data: dict[str, Any]) -> None:
            self.data = data

        @classmethod
        def from_dict(cls, data: dict[str, Any]) -> Plain:
            return cls(data)

    obj = from_dict(Plain, {"x": 1}, lazy=True)
    assert type(obj) is Plain and obj.data == {"x": 1}
    assert is_model_class(Plain) and is_model_class(Gizmo) and not is_model_class(dict)


def test_a_class_with_its_own_model_validate_is_validated_through_it() -> None:
    seen: list[Any] = []

    class Traced(CustomResource, group="lazy.kubeop.dev", version="v1"):
        spec: dict[str, Any] = Field(default_factory=dict)

        @classmethod
        def model_validate(cls, obj: Any, **kwargs: Any) -> Traced:  # type: ignore[override]
            seen.append(obj)
            return super().model_validate(obj, **kwargs)

    data = {"apiVersion": "lazy.kubeop.dev/v1", "kind": "Traced", "metadata": {"name": "t"}}
    assert from_dict(Traced, data).metadata.name == "t" and seen == [data]


def test_private_attributes_and_post_init_run_when_a_lazy_model_is_built() -> None:
    class Counted(CustomResource, group="lazy.kubeop.dev", version="v1"):
        spec: dict[str, Any] = Field(default_factory=dict)
        _reads: int = PrivateAttr(default=0)
        _ready: bool = PrivateAttr(default=False)

        def model_post_init(self, context: Any) -> None:
            self._ready = True

    data = {
        "apiVersion": "lazy.kubeop.dev/v1",
        "kind": "Counted",
        "metadata": {"name": "c"},
        "spec": {"a": 1},
    }
    lazy = from_dict(Counted, data, lazy=True)
    assert lazy._ready and lazy._reads == 0 and lazy == from_dict(Counted, data)


@pytest.mark.parametrize("lazy", [False, True])
def test_a_model_of_shared_data_does_not_share_its_values(lazy: bool) -> None:
    data = _gizmo(size=1)
    data["status"] = {"conditions": [{"type": "Ready"}]}
    shared = from_dict(Gizmo, data, lazy=lazy, shared=True)
    assert shared.status is not None
    shared.status["conditions"].append({"type": "Mine"})
    assert data["status"] == {"conditions": [{"type": "Ready"}]}
    plain = from_dict(Gizmo, data, lazy=lazy)  # without: a field typed Any holds the same list
    assert plain.status is not None and plain.status["conditions"] is data["status"]["conditions"]
