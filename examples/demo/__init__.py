"""Seed 000's Demo operator: one busybox Pod per Demo, like a Deployment with replicas=1."""
