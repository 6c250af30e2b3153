"""Datasets in one canonical schema, and loaders for the published formats."""

from recharness.data.store import Dataset, load_dataset, save_dataset

__all__ = ["Dataset", "load_dataset", "save_dataset"]
