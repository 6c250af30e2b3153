"""Benchmark suites; each registers its tasks in `registry`."""
