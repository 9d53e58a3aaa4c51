"""Challenge graders: `grade(task, outputs, private, public) -> {metric: value}` for ranking.

One module per challenge (family); a task names its grader as `module:function` in `rexmle.grader`,
e.g. `pytest_automedbench.rexmle.graders.isles22:isles22`. Modules are imported only when a task
uses them, so a run pays only for its own challenge's libraries.

A grader never raises on a bad submission: a missing or unreadable case scores the worst value
(Dice 0, HD95 = the image diagonal, ...), as a human team's missing case would on the challenge
platform. Metric names are the leaderboard's column names (leaderboard.csv beside the task file).
"""
