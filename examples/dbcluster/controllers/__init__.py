"""The controllers of the DatabaseCluster operator: one module per kind."""
