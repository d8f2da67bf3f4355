"""Run the application operator against the current kubeconfig: python -m examples.application"""

import logging

from examples.application.operator import controller
from kubeop.manager import Manager

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
manager = Manager(name="application-operator")
manager.add(controller())
manager.run()
