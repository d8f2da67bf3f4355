"""Run the hostPath provisioner against the current kubeconfig: python -m examples.hostpath_provisioner"""

from examples.hostpath_provisioner.provisioner import controllers
from kubeop import Manager, configure_logging
from kubeop.manager import Serving

configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
manager = Manager(name="hostpath-provisioner", serving=Serving(metrics_address=None, health_address=None))
for c in controllers():
    manager.add(c)
manager.run()
