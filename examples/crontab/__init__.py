"""CronTab (seed 001) with two versions, webhooks and a controller: v1beta1 keeps ``cronSpec`` as
a string, v1 (the storage version and the conversion hub) has a structured schedule; a
validating webhook rejects an invalid cron expression naming ``spec.cronSpec``, a defaulting
webhook sets ``replicas: 1``; the controller starts a batch/v1 Job at each time the schedule
names, as the CronJob controller does (schedule.py has the time arithmetic, cron.py the check of
an expression). Laid out as ``kubeop init`` lays out a project: api/<version>/ for the kind,
controllers/ for the reconciler, webhooks/ for the webhooks of each version, main.py for the
manager, config/ as ``kubeop manifests`` writes it.

    python -m examples.crontab      # CRD + webhook configurations applied, controller + webhooks run
"""
