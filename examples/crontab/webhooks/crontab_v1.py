"""The CronTab conversion webhook: v1beta1 to and from v1, the hub (the models' to_hub/from_hub)."""

from __future__ import annotations

from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from kubeop.webhook import Conversion

# --8<-- [start:conversion]
conversion = Conversion.of_models(CronTab, CronTabV1Beta1)
# --8<-- [end:conversion]

WEBHOOKS = [conversion]
