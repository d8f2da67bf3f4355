"""Seed 000's MySQL operator: a StatefulSet with a persistent volume per pod, a generated root
password, and an e-mail on every pod start and stop (laid out as ``kubeop init`` lays out a
project: api/<version>/ for the kind, controllers/ for the reconciler, main.py for the manager)."""
