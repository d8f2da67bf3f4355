"""Run the demo operator against the current kubeconfig: python -m examples.demo"""

from examples.demo.operator import controller
from kubeop import Manager, configure_logging

configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
manager = Manager(name="demo-operator")
manager.add(controller())
manager.run()
