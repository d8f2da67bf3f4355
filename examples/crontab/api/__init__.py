"""The API of the CronTab operator: one package per version, v1 the hub and storage version."""

from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from kubeop.crd import CustomResource

VERSIONS: list[type[CustomResource]] = [CronTabV1Beta1, CronTab]
"""Both versions of the kind, in the order the CRD lists them."""
