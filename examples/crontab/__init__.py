"""CronTab (seed 001) with two versions and webhooks: v1beta1 keeps ``cronSpec`` as a string, v1
(the storage version and the conversion hub) has a structured schedule; a validating webhook
rejects an invalid cron expression naming ``spec.cronSpec``, a defaulting webhook sets
``replicas: 1``."""
