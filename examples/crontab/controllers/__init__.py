"""The controllers of the CronTab operator: one module per kind."""
