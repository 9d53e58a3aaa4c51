"""The run pipeline: one run end to end (runner), the conditions it was made under, its progress and GPU use."""
