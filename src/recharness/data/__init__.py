"""Datasets in one canonical schema, and loaders for the published formats."""

# isort: skip_file

from recharness.data.store import Dataset, load_dataset, save_dataset
from recharness.data.prepare import PREPARERS, prepare_dataset  # noqa: E402  (after store: loaders import it)

__all__ = ["Dataset", "load_dataset", "save_dataset", "PREPARERS", "prepare_dataset"]
