"""stable.example.com/v1beta1 (deprecated; converted to and from v1)."""
