"""Seed 002's database-vendor operator: a DatabaseCluster of N members in a StatefulSet, scaled
one member at a time, self-healing, with configuration rolled member by member and a
decommission step before delete (laid out as ``kubeop init`` lays out a project)."""
