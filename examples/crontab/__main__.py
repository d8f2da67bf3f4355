"""Run the CronTab operator against the current kubeconfig's cluster: python -m examples.crontab
(see examples/crontab/main.py)."""

from examples.crontab.main import main

main()
