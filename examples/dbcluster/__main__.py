"""Run the DatabaseCluster operator against the current kubeconfig: python -m examples.dbcluster"""

from examples.dbcluster.main import main

main()
