"""Seed 004's Application operator: an Application owns a Deployment built from its template."""
