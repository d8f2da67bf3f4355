"""CronTab (seed 001) with two versions, webhooks and a controller: v1beta1 keeps ``cronSpec`` as
a string, v1 (the storage version and the conversion hub) has a structured schedule; a
validating webhook rejects an invalid cron expression naming ``spec.cronSpec``, a defaulting
webhook sets ``replicas: 1``; the controller (controller.py) starts a batch/v1 Job at each time
the schedule names, as the CronJob controller does (schedule.py has the time arithmetic).

    python -m examples.crontab      # CRD + webhook configurations applied, controller + webhooks run
"""
