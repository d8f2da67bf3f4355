"""Run the hostPath provisioner against the current kubeconfig: python -m examples.hostpath_provisioner"""

import logging

from examples.hostpath_provisioner.provisioner import controllers
from kubeop.manager import Manager

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
manager = Manager(name="hostpath-provisioner", metrics_address=None, health_address=None)
for c in controllers():
    manager.add(c)
manager.run()
