"""Scoring: the formulas (Agentic, Task, Overall, medals), the guarded metric child, the failure-code taxonomy."""
