"""The API of the DatabaseCluster operator: one package per version."""
