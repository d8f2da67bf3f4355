"""Run the MySQL operator against the current kubeconfig: python -m examples.mysql"""

from examples.mysql.main import main

main()
