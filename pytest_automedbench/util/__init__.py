"""Utilities with no knowledge of runs: reading hostile trees safely, writing files atomically."""
