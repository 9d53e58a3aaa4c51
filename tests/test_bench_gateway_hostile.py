"""benchmarks/bench_gateway_hostile.py cannot rot: its core, with tiny counts, a short deadline and
the gateway's limits lowered, still runs every hostile client, the honest calls all succeed and the
result has its fields (the measured figures are in docs/benchmarks.md)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_gateway_hostile", ROOT / "benchmarks" / "bench_gateway_hostile.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

LIMITS = {"max_connections": 12, "peer_connections": 4, "run_connections": 3, "idle_timeout_s": 2.0,
          "headers_timeout_s": 1.0, "body_timeout_s": 1.0}


def test_the_hostile_load_benchmark_runs_small():
    result = bench.measure(calls=6, deadline_s=4.0, count=300, half_open_procs=2, limits=LIMITS, settle_s=1.0)
    assert result["quiet"]["ok"] == result["attacked"]["ok"] == 6, result["attacked"]
    for part in ("baseline", "peak", "after"):
        assert set(result[part]) == {"rss_mib", "hwm_mib", "threads", "active_count", "open_connections"}
    for run in ("quiet", "attacked"):
        assert result[run]["median_ms"] > 0 and result[run]["p95_ms"] >= result[run]["median_ms"]
    assert set(result["flat"]) == {"peak rss", "peak threads", "rss after", "threads after"}
    assert result["passed"], result
    assert result["peak"]["open_connections"] <= LIMITS["max_connections"]
    assert result["gateway"]["evictions"] > 0 and result["gateway"]["max_connections"] == 12
    kinds = {key.split(":")[0].split(" KiB")[0] for key in result["hostile"]}
    assert {"half-open", "slowloris", "run-cap", "no token, huge length", "no token, endless chunks",
            "token, malformed chunks", "garbage"} <= kinds, kinds
    assert "a hostile process reported nothing" not in result["hostile"]
    assert result["hostile"].get("run-cap: 429", 0) > 0  # past the run's cap
