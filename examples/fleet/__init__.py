"""A fleet operator: every Widget, in every cluster, gets its ConfigMap (one process for all)."""
