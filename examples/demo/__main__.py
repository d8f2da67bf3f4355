"""Run the demo operator against the current kubeconfig: python -m examples.demo"""

import logging

from examples.demo.operator import controller
from kubeop.manager import Manager

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
manager = Manager(name="demo-operator")
manager.add(controller())
manager.run()
