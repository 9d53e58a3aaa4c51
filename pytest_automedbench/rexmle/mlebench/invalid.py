"""MLE-bench's verdict on a submission it cannot grade (its InvalidSubmissionError).

Its own module so that the graders (grading.py's, detection.py's, segmentation.py's) can raise it
while grading.py's table of graders imports them: no import cycle between them.
"""
from __future__ import annotations


class InvalidSubmission(ValueError):
    """The submission is not gradable (MLE-bench's InvalidSubmissionError); the message says why."""


__all__ = ["InvalidSubmission"]
