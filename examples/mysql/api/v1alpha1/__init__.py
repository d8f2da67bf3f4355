"""db.example.com/v1alpha1."""

from examples.mysql.api.v1alpha1.mysql import CRD, MySQL, MySQLSpec, MySQLStatus, sample

__all__ = ["CRD", "MySQL", "MySQLSpec", "MySQLStatus", "sample"]
