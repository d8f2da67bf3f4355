"""Run the PhpDeployment operator against the current kubeconfig: python -m examples.php_deployment"""

from examples.php_deployment.operator import operator
from kubeop import Manager, configure_logging

configure_logging()  # text, or KUBEOP_LOG_FORMAT=json; KUBEOP_LOG_LEVEL
helm_operator = operator()
manager = Manager(name="php-deployment-operator")
helm_operator.add_to(manager)
try:
    manager.run()
finally:
    helm_operator.close()
