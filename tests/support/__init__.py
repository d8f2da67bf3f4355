"""Support shared by the tests and the benchmarks (bench/ puts the repository root on sys.path)."""
