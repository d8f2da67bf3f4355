"""Run the CronTab operator against the current kubeconfig's cluster: python -m examples.crontab

A CA and a serving certificate for 127.0.0.1 are generated (and kept for the next run), the CRD
and the webhook configurations are applied with that CA as caBundle, then the Manager runs the
controller (a Job at each scheduled time) and serves the webhooks on https://127.0.0.1:9443
until SIGTERM / SIGINT. The API server has to reach 127.0.0.1, as the local control plane
(``kubeop cluster up``) does. LEADER_ELECT=true runs it with leader election.
"""

import asyncio
import logging
import os

from examples.crontab.operator import OPERATOR, build_manager, install
from kubeop.client import Client, load_config
from kubeop.webhook import Endpoint, local_certificates
from kubeop.webhook.certs import DEFAULT_CERT_DIR

ADDRESS = "127.0.0.1:9443"


async def _install(endpoint: Endpoint) -> None:
    async with Client(load_config()) as client:
        await install(client, endpoint)


logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
certs = local_certificates(DEFAULT_CERT_DIR)
asyncio.run(_install(Endpoint.url(f"https://{ADDRESS}", ca_bundle=certs.ca_pem)))
manager = build_manager(
    webhook_address=ADDRESS,
    webhook_cert_dir=str(DEFAULT_CERT_DIR),
    leader_election=os.environ.get("LEADER_ELECT", "false").lower() in ("1", "true", "yes"),
    leader_election_id=f"{OPERATOR}-leader",
)
manager.run()
