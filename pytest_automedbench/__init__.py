"""pytest-automedbench: benchmark autonomous AI agents on medical-AI research tasks with pytest."""

__version__ = "0.1.0"
