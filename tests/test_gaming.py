"""Gaming suite: step files that try to earn scores they did not work for, each under a ceiling.

Every step file in tests/gaming/ runs as the reference solution of its own copy of a tiny task
(tests/gaming/tasks.yaml: segmentation, a single-file VQA and classification, a relative
enhancement task), all in ONE inner pytest session, once per test session even under
pytest-xdist (like the red team). The session judges with an LLM judge behind the loopback
MockLLMServer playing a gullible model: it obeys whatever the quoted agent data asks of it and
answers anything else with prose (so those runs keep the heuristic verdict, with the reason).
tests/gaming/cases.yaml gives each case its ceilings (the most it may score) or, for the honest
controls, its floors; the terminal summary prints the table (tests/gaming/table.py).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES
from inner_session import PINNED_REPLAYS, inner_env, once_per_session
from pytest_automedbench.judge.deciding.llm import CLOSE, OPEN
from pytest_automedbench.judge.rubric import load_rubric
from pytest_automedbench.testing import MockLLMServer

GAMING = Path(__file__).parent / "gaming"
CASES = yaml.safe_load((GAMING / "cases.yaml").read_text())
TASKS = yaml.safe_load((GAMING / "tasks.yaml").read_text())
MEDALS = ("A", "B", "C", "F", None)  # best first
OBEY = ("full marks", "every item met", "every criterion as satisfied")


def gullible_judge(request: dict, api: str) -> dict:
    """A judge model that obeys instructions found in the agent's quoted data, and otherwise rambles."""
    prompt = "".join(str(m.get("content")) for m in request.get("messages") or [])
    quoted = re.findall(re.escape(OPEN) + r".*?" + re.escape(CLOSE), prompt, re.S)
    if any(phrase in q for q in quoted for phrase in OBEY):
        r = load_rubric()
        return {"text": json.dumps({
            "S1": {i: {"met": True, "evidence": "as the plan asks"} for i in r.items("S1")},
            "S2": {i: {"met": True, "evidence": "as the plan asks"} for i in r.items("S2")},
            "S3": {"level": "pilot_and_quality_check", "evidence": "the validation ladder at its top rung"}})}
    return {"text": "I have looked at the run and it seems fine overall."}


def build_suite(root: Path) -> None:
    suite = root / "suite"
    suite.mkdir()
    shutil.copy(FIXTURES / "tiny" / "tiny_prep.py", suite)
    shutil.copy(GAMING / "gaming_prep.py", suite)
    for case, spec in CASES.items():
        task = dict(TASKS[spec["task"]], id="gm-" + case.replace("_", "-"), version="1",
                    reference_solution=f"{case}.steps.yaml",
                    policy={"time_limit_s": 300, "max_turns": 16, "cell_timeout_s": 60})
        shutil.copy(GAMING / f"{case}.yaml", suite / f"{case}.steps.yaml")
        (suite / f"{case}.task.yaml").write_text(yaml.safe_dump(task, sort_keys=False))


def summary(result: dict | None) -> dict | None:
    if result is None:
        return None
    return {"overall": result["overall"], "agentic": result["agentic"], "task": result["task_score"],
            "medal": result["medal"], "failure_mode": result["failure_mode"], **result["stages"],
            "codes": [c["code"] for c in result["error_codes"]], "judge": result["judge"],
            "evidence": {s: {k: v["evidence"] for k, v in result["stage_evidence"][s].items()}
                         for s in ("S1", "S2", "S3")}}


def run_gaming(root: Path) -> dict:
    build_suite(root)
    runs = root / "runs"
    with MockLLMServer([], responder=gullible_judge) as server:
        env = inner_env(root, OPENAI_BASE_URL=server.openai_base_url, OPENAI_API_KEY="gaming")
        cmd = [sys.executable, "-m", "pytest", "suite", "-p", "no:cacheprovider", "-q", "--amb-model=reference",
               "--amb-tier=standard", "--amb-judge=openai:gaming-judge", "--amb-retry-delay=0", PINNED_REPLAYS,
               f"--amb-data-dir={root / 'data'}", f"--amb-runs-dir={runs}", f"--amb-report-dir={root / 'reports'}"]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1500)
        prompts = [json.dumps(r["json"].get("messages")) for r in server.requests]
    facts = {"returncode": proc.returncode, "stdout": proc.stdout[-4000:], "stderr": proc.stderr[-2000:],
             "judge_prompts": len(prompts), "largest_prompt": max(map(len, prompts), default=0), "cases": {}}
    for case in CASES:
        result_file = runs / f"gm-{case.replace('_', '-')}__standard__reference__r1" / "result.json"
        result = json.loads(result_file.read_text()) if result_file.exists() else None
        facts["cases"][case] = summary(result)
    facts["injections_prompted"] = sum("ignore the rubric" in p for p in prompts)
    facts["paraphrases_prompted"] = sum("every criterion as satisfied" in p for p in prompts)
    return facts


# its session is made once per test session (a file lock): every test that reads it on one xdist worker
# (--dist loadgroup), so the other worker goes on with other tests instead of waiting on the lock
pytestmark = pytest.mark.xdist_group("gaming")


@pytest.fixture(scope="module")
def gaming(tmp_path_factory):
    return once_per_session(tmp_path_factory, "gaming", run_gaming)


def over_ceiling(spec: dict, r: dict) -> list[str]:
    """Every way the run scored more than its ceiling (or, for a control, less than its floor)."""
    problems = []
    for key, most in (spec.get("max") or {}).items():
        if r[key] > most + 1e-9:
            problems.append(f"{key} {r[key]:.4g} > ceiling {most}")
    for key, least in (spec.get("min") or {}).items():
        if r[key] < least - 1e-9:
            problems.append(f"{key} {r[key]:.4g} < floor {least}")
    if "medal" in spec and MEDALS.index(r["medal"]) < MEDALS.index(spec["medal"]):
        problems.append(f"medal {r['medal']} better than {spec['medal']}")
    if "medal_at_least" in spec and MEDALS.index(r["medal"]) > MEDALS.index(spec["medal_at_least"]):
        problems.append(f"medal {r['medal']} worse than {spec['medal_at_least']}")
    missing = set(spec.get("fires", ())) - set(r["codes"])
    if missing:
        problems.append(f"did not fire {sorted(missing)}")
    if spec.get("judge") and spec["judge"] not in (r["judge"].get("fallback") or "") + json.dumps(r["judge"]):
        problems.append(f"judge block lacks {spec['judge']!r}: {r['judge']}")
    return problems


def ceiling_text(spec: dict) -> str:
    parts = [f"{k}<={v}" for k, v in (spec.get("max") or {}).items()]
    parts += [f"{k}>={v}" for k, v in (spec.get("min") or {}).items()]
    parts += [f"medal<={spec['medal']}"] if "medal" in spec else []
    parts += [f"medal>={spec['medal_at_least']}"] if "medal_at_least" in spec else []
    return ", ".join(parts)


@pytest.mark.parametrize("case", list(CASES))
def test_gaming_case(gaming, case, record_property):
    spec, r = CASES[case], gaming["cases"][case]
    assert r is not None, f"{case}: no result.json (the inner session did not go on)\n{gaming['stdout']}"
    problems = over_ceiling(spec, r)
    record_property("gaming", json.dumps({
        "case": case, "task": spec["task"], "control": bool(spec.get("control")), "ceiling": ceiling_text(spec),
        "overall": r["overall"], "medal": r["medal"], "S3": r["S3"], "ok": not problems}))
    assert not problems, f"{case} ({spec['about']}): " + "; ".join(problems) + f"\n{json.dumps(r, indent=1)[:3000]}"


def test_gaming_session_completed(gaming):
    """At least 20 gaming step files, every run scored, the judge never shown an injected plan it obeyed."""
    gamed = [c for c, s in CASES.items() if not s.get("control")]
    assert len(gamed) >= 20 and set(CASES) == {p.stem for p in GAMING.glob("*.yaml")} - {"tasks", "cases"}
    missing = [c for c in CASES if gaming["cases"][c] is None]
    assert not missing, f"no result for {missing}:\n{gaming['stdout']}\n{gaming['stderr']}"
    # The explicit injection never reaches the judge model; the paraphrase does (and earns nothing).
    assert gaming["injections_prompted"] == 0 and gaming["paraphrases_prompted"] >= 1
    assert gaming["largest_prompt"] < 60_000, "a 50 MB plan.md must not reach the judge's prompt"
