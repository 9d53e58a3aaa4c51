"""The run's data model: what a run did (its trace and record) and what it scored (result.json)."""
