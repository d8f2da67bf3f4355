"""One replica of a sharded fleet operator, for the e2e test (run as a process so that the test
can SIGKILL it): ``python -m tests.e2e.fleet.replica IDENTITY NAMESPACE HUB_KUBECONFIG
NAME=KUBECONFIG...``. Its controller marks ConfigMap ``probe`` in NAMESPACE of each cluster with
an annotation ``fleet.kubeop.dev/<cluster>: <identity> <n>``, n counting this replica's writes."""

from __future__ import annotations

import itertools
import logging
import sys

from kubeop.client import load_kubeconfig
from kubeop.controller import Context, Controller, Request, Result
from kubeop.core.resource import ApiResource
from kubeop.fleet import ClusterSharding, Fleet, Kubeconfigs
from kubeop.manager import configure_logging

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def main() -> None:
    identity, namespace, hub, *pairs = sys.argv[1:]
    clusters = dict(pair.split("=", 1) for pair in pairs)
    count = itertools.count(1)

    async def reconcile(req: Request, ctx: Context) -> Result | None:
        if req.name != "probe":
            return None
        key = f"fleet.kubeop.dev/{req.cluster}"
        mark = {"metadata": {"annotations": {key: f"{identity} {next(count)}"}}}
        await ctx.client.patch(CM, req.name, mark, namespace=namespace)
        return Result(requeue_after=0.3)  # a replica that runs a cluster keeps writing to it

    fleet = Fleet(
        Kubeconfigs(clusters),
        name="fleet-shards",
        sharding=ClusterSharding(
            namespace=namespace,
            hub=load_kubeconfig(hub, qps=None),
            identity=identity,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
        ),
    )
    fleet.add(Controller.for_(CM, namespace=namespace).named("marker").reconcile(reconcile))
    configure_logging(level=logging.INFO)
    fleet.run()


if __name__ == "__main__":
    main()
