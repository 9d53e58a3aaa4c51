"""The session's settings: the `--amb-*` options, their types, their checks, the tiers a session collects."""
