"""The API of the MySQL operator: one package per version."""
