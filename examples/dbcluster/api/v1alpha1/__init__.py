"""db.example.com/v1alpha1."""

from examples.dbcluster.api.v1alpha1.databasecluster import (
    CRD,
    DatabaseCluster,
    DatabaseClusterSpec,
    DatabaseClusterStatus,
    sample,
)

__all__ = ["CRD", "DatabaseCluster", "DatabaseClusterSpec", "DatabaseClusterStatus", "sample"]
