"""Run the PhpDeployment operator against the current kubeconfig: python -m examples.php_deployment"""

import logging

from examples.php_deployment.operator import operator
from kubeop.manager import Manager

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
helm_operator = operator()
manager = Manager(name="php-deployment-operator")
helm_operator.add_to(manager)
try:
    manager.run()
finally:
    helm_operator.close()
