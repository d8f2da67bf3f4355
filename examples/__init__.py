"""Example operators from the seed articles, each with end-to-end tests under tests/e2e/examples."""
