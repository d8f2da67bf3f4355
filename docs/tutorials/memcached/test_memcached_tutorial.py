"""The tutorial's checks: the Deployment follows spec.size and the status tells the truth about
it (Ready only with every Pod available); deleting runs the finalizer.

docs/tutorials/memcached.md shows this file; tests/e2e/cli/test_tutorial_e2e.py copies it into the
project as tests/test_memcached_tutorial.py and runs the project's ``make test``.
"""

from __future__ import annotations

from kubeop import Client

from memcached_operator.api.v1.memcached import Memcached
from memcached_operator.controllers.memcached import DEPLOYMENTS, FINALIZER

from .conftest import Operator, load_sample

SAMPLE = "cache_v1_memcached.yaml"


async def test_the_deployment_follows_the_size(client: Client, operator: Operator, namespace: str) -> None:
    created = await client.create(load_sample(Memcached, SAMPLE, namespace))

    async def scaled() -> bool:
        dep = await client.get_or_none(DEPLOYMENTS, created.metadata.name or "", namespace=namespace)
        return dep is not None and dep["spec"]["replicas"] == 2

    await operator.eventually(scaled, what="a Deployment of 2 replicas")

    async def status_matches_the_deployment() -> bool:
        obj = await client.get(Memcached, created.metadata.name or "", namespace=namespace)
        dep = await client.get(DEPLOYMENTS, created.metadata.name or "", namespace=namespace)
        available = (dep.get("status") or {}).get("availableReplicas", 0)
        if obj.status is None or obj.status.observed_generation != obj.metadata.generation:
            return False
        ready = {c.type: c for c in obj.status.conditions}.get("Ready")
        # Ready is True only with 2 Pods available (a control plane without a scheduler and
        # kubelets never gets there: then Ready is False, Progressing, saying how far it is).
        return (
            ready is not None
            and (ready.status == "True") == (available >= 2)
            and (ready.reason == ("Available" if available >= 2 else "Progressing"))
        )

    await operator.eventually(status_matches_the_deployment, what="a status that matches the Deployment")
    # Left behind on purpose: the operator fixture deletes it and waits for its finalizer.


async def test_deleting_runs_the_finalizer(client: Client, operator: Operator, namespace: str) -> None:
    created = await client.create(load_sample(Memcached, SAMPLE, namespace))
    name = created.metadata.name or ""

    async def finalizer_added() -> bool:
        obj = await client.get(Memcached, name, namespace=namespace)
        return FINALIZER in (obj.metadata.finalizers or [])

    await operator.eventually(finalizer_added, what="the finalizer")
    await client.delete(Memcached, name, namespace=namespace)

    async def gone() -> bool:
        return await client.get_or_none(Memcached, name, namespace=namespace) is None

    await operator.eventually(gone, what="the Memcached to be deleted")

    async def event_recorded() -> bool:
        events = (await client.list("events.events.k8s.io", namespace=namespace)).items
        return any(e.get("reason") == "Finalizing" and e["regarding"]["name"] == name for e in events)

    await operator.eventually(event_recorded, what="the Finalizing Event")
