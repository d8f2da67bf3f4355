"""Admission and conversion webhooks of the CronTab operator: one module per version."""
