"""The LLMRec tasks' output formats: the package-level validators, re-exported.

The rules live in recharness.tasks.validation (shared by every suite, tested
in tests/test_validation.py); this module keeps the LLMRec import path
`recharness.tasks.llmrec.validation` working.
"""

from __future__ import annotations

from recharness.tasks.validation import (
    MAX_SCAN,
    FreeText,
    JsonField,
    JsonObject,
    NumberInRange,
    OutputFormat,
    RankedList,
    clean_text,
    finite_number,
    flat_json_objects,
    normalize_for_metrics,
    scan,
    strip_trailing_commas,
)

__all__ = [
    "MAX_SCAN",
    "scan",
    "flat_json_objects",
    "finite_number",
    "OutputFormat",
    "NumberInRange",
    "JsonObject",
    "JsonField",
    "RankedList",
    "FreeText",
    "clean_text",
    "normalize_for_metrics",
    "strip_trailing_commas",
]
