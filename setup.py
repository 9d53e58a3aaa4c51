"""Build glue that pyproject.toml cannot express (everything else is in pyproject.toml).

The task suites (task files, reference solutions, ReX-MLE leaderboards, the demo's weights) live
at the repository root as task_suites/, where people edit them; a wheel carries them as the data
folder pytest_automedbench/task_suites (see pytest_automedbench/tasks/suites.py, which finds either).
"""
from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["pytest_automedbench", "pytest_automedbench.*"]),
              "pytest_automedbench.task_suites"],
    package_dir={"pytest_automedbench.task_suites": "task_suites"},
)
