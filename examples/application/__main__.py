"""Run the application operator against the current kubeconfig: python -m examples.application"""

from examples.application.operator import controller
from kubeop import Manager, configure_logging

configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
manager = Manager(name="application-operator")
manager.add(controller())
manager.run()
