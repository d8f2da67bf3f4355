"""A Cluster is fixed once built, down to its reconciler client: its parts cannot be set or
swapped, and the write policy it was built with (a Manager's lease fence, its shard labels)
cannot be dropped through the reconciler client's deprecated setters."""

from __future__ import annotations

import warnings

import pytest

from kubeop.cluster import Cluster
from kubeop.controller import WritePolicy
from kubeop.testing import FakeCluster


def test_no_part_of_a_cluster_nor_of_its_reconciler_client_can_be_swapped() -> None:
    fake = FakeCluster()
    cluster = Cluster(fake.client())
    other = Cluster(fake.client())
    for name in ("api", "cache", "client", "recorder", "probe", "mapper"):
        with pytest.raises(AttributeError):
            setattr(cluster, name, getattr(other, name))
    with pytest.raises(AttributeError):
        cluster.client.api = other.api  # type: ignore[misc]
    with pytest.raises(AttributeError):
        cluster.client.cache = other.cache  # type: ignore[misc]
    with pytest.raises(AttributeError):
        cluster.client.policy = WritePolicy()  # type: ignore[misc]
    assert cluster.client.api is cluster.api and cluster.client.cache is cluster.cache


def test_the_policy_a_cluster_was_built_with_cannot_be_dropped_through_the_deprecated_setters() -> None:
    def fence() -> None:
        raise PermissionError("not the leader")

    def shard(res: object, body: object) -> dict[str, str]:
        return {"shard": "0"}

    cluster = Cluster(FakeCluster().client(), policy=WritePolicy(guard=fence, labels=shard))
    with pytest.raises(ValueError, match="replacing it would drop that fence"):
        cluster.client.write_guard = None
    with pytest.raises(ValueError, match="replacing them would move objects out of their shard"):
        cluster.client.write_labels = None
    assert cluster.client.policy.guard is fence and cluster.client.policy.labels is shard
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cluster.client.write_guard = fence  # the same one: nothing changes
    assert cluster.client.policy.guard is fence
