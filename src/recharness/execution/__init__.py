"""Answering samples: one executor (cached, resumable, exactly once) behind every path that asks a model.

Below the suites and above models/: a suite's judge or phrasing step asks through it as `run` does.
"""
