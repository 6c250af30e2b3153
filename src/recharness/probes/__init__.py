"""Probes of what a model knows beyond the benchmark tasks (e.g. memorization of a dataset)."""
