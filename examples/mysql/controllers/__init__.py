"""The controllers of the MySQL operator: one module per kind."""
