"""Task specs: schema, YAML loading with file:field errors, tier briefs."""
from .schema import TIERS, TRACKS, TaskSpec
from .loader import LoadedTask, TaskSpecError, load_task_file

__all__ = ["TIERS", "TRACKS", "TaskSpec", "LoadedTask", "TaskSpecError", "load_task_file"]
