"""A pytest plugin for the golden test (test_record_golden.py): the demo data's secret seed fixed, so every
build of the demo data is the same (it is otherwise fresh per build: demo_common.secret_rng)."""
import pytest_automedbench.data.demo_common as demo_common


class _FixedSecrets:
    @staticmethod
    def randbits(n: int) -> int:
        return 20260934 % (1 << n)


demo_common.secrets = _FixedSecrets()
