"""stable.example.com/v1 (the hub and storage version)."""
