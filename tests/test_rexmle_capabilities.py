"""The ReX-MLE capability judge: heuristic detector (code that ran) and LLM judge (with a fake model)."""
import json

import pytest

from pytest_automedbench.agents.base import Agent, Reply
from pytest_automedbench.rexmle.capabilities import (fragments, heuristic_report, llm_report, load_strategies,
                                                     log_entries, format_report)


def conv(*cells, say=None):
    """A neutral conversation: each cell is (code, exit_code[, what it printed]); a cell that exited 0
    printed "done" unless told otherwise; a cell starting with "python " is bash."""
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "brief"}]
    if say:
        msgs.append({"role": "assistant", "content": say, "tool_calls": []})
    for i, (code, rc, *printed) in enumerate(cells):
        out = printed[0] if printed else ("done" if rc == 0 else "Traceback ...")
        language = "bash" if code.startswith("python ") else "python"
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "name": "execute_code", "arguments": {"language": language, "code": code}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "name": "execute_code",
                     "content": f"exit_code: {rc}\n" + (f"[stdout]\n{out}" if out else "")})
    return msgs


def by_key(report):
    return {r["key"]: r for r in report["strategies"]}


def test_thirteen_strategies_as_data():
    s = load_strategies()
    assert [x.id for x in s] == list(range(1, 14))
    assert len({x.key for x in s}) == 13 and all(x.criteria and (x.calls or x.names or x.loops) for x in s)


def test_heuristic_counts_only_executed_successful_code():
    c = conv(("from monai.networks.nets import SegResNet\nimport numpy as np\nnet = SegResNet()\n"
              "y = net(np.load('/data/public/case_000.npy'))", 0),
             ("from monai.losses import DiceLoss\nloss = DiceLoss()(pred, y)", 1),  # failed cell: no evidence
             ("from skimage.morphology import remove_small_objects\nimport numpy as np\n"
              "mask = remove_small_objects(np.load('/data/public/case_001.npy') > 0, 10)", 0),
             say="Plan: we will use optuna for a hyperparameter search and an ensemble of folds.")
    r = by_key(heuristic_report(c))
    assert r["state_of_the_art"]["any_evidence"] == 1 and "SegResNet" in r["state_of_the_art"]["evidence"]
    assert r["post_processing"]["any_evidence"] == 1
    assert r["metric_in_method"]["any_evidence"] == 0  # only in a failed cell
    assert r["hyperparameter_search"]["any_evidence"] == 0  # only planned in prose
    assert r["seed_fold_ensemble"]["any_evidence"] == 0


# A search that evaluates something: a study whose objective thresholds the data.
OPTUNA = ("import optuna\nimport numpy as np\nx = np.load('/data/public/case_000.npy')\nstudy = optuna.create_study()\n"
          "study.optimize(lambda t: float(np.mean(x > t.suggest_float('t', 0, 1))), n_trials=3)")


def test_names_and_models_that_did_nothing_are_not_strategies():
    """#25: names like worst / thr / ensemble, an unused UNet and a from_pretrained stub in one printing cell."""
    gamed = ("from monai.networks.nets import UNet\nimport numpy as np\n"
             "def from_pretrained(name):\n    return None\n"
             "net = UNet(spatial_dims=3, in_channels=1, out_channels=3, channels=(4, 8), strides=(2,))\n"
             "w = from_pretrained('imagenet')\nworst = sorted([3, 1, 2])\nensemble = list(range(3))\n"
             "best_thr = max([0.1, 0.2])\nfor thr in [0.5]:\n    pass\nfor fold in range(5):\n    pass\n"
             "print(worst, ensemble, best_thr)")
    r = heuristic_report(conv((gamed, 0)))
    assert r["any_evidence_mean"] == 0.0, [(x["key"], x["evidence"]) for x in r["strategies"] if x["any_evidence"]]


def test_an_ensemble_needs_two_models_that_ran():
    one = ("import torch, numpy as np\nx = torch.from_numpy(np.load('/data/public/case_000.npy'))\n"
           "a = torch.nn.Conv3d(1, 2, 1)\nensemble = a(x)\nprint(ensemble.shape)")
    two = one.replace("ensemble = a(x)", "b = torch.nn.Conv3d(1, 2, 3, padding=1)\nensemble = (a(x) + b(x)) / 2")
    assert by_key(heuristic_report(conv((one, 0))))["heterogeneous_ensemble"]["any_evidence"] == 0
    assert by_key(heuristic_report(conv((two, 0))))["heterogeneous_ensemble"]["any_evidence"] == 1


def test_any_evidence_versus_per_fragment_mean():
    filler = "x = 1\n" + "# padding\n" * 300
    cells = [(OPTUNA, 0)] + [(filler, 0)] * 4
    report = heuristic_report(conv(*cells), max_chars=3500)
    assert report["n_fragments"] >= 3
    row = by_key(report)["hyperparameter_search"]
    assert row["any_evidence"] == 1
    assert row["fragment_mean"] == pytest.approx(1 / report["n_fragments"])
    assert "Optimising hyperparameters systematically" in format_report(report)


def test_fragments_pack_entries_and_cut_long_ones():
    entries = log_entries(conv(("a" * 40, 0), ("b" * 40, 0), ("c" * 500, 0)))
    frags = fragments(entries, max_chars=200)
    assert [len(f) for f in frags] == [2, 1]  # the two short cells share a fragment
    assert len(frags[1][0].text) == 200 and frags[1][0].cell == 2  # the long one is cut


class FakeJudge(Agent):
    """Answers with canned JSON; records what it was asked."""

    model_id = "fake-judge"

    def __init__(self, replies):
        self.replies, self.asked = list(replies), []

    def respond(self, conversation, tools):
        assert tools == []
        self.asked.append(conversation)
        return Reply(text=self.replies.pop(0))


def test_llm_judge_json_per_strategy():
    answer = {"results": [{"id": i, "strategy": "s", "score": int(i in (2, 9)), "evidence": f"ev{i}"}
                          for i in range(1, 14)]}
    judge = FakeJudge(["Here you go:\n" + json.dumps(answer)])
    report = llm_report(judge, conv(("import torch", 0)))
    rows = {r["id"]: r for r in report["strategies"]}
    assert rows[2]["any_evidence"] == 1 and rows[2]["evidence"] == "ev2" and rows[9]["fragment_mean"] == 1.0
    assert rows[1]["any_evidence"] == 0 and report["errors"] == [] and report["model_id"] == "fake-judge"
    prompt = judge.asked[0][1]["content"]
    assert "TARGET STRATEGY 13: Optimising hyperparameters systematically" in prompt and "import torch" in prompt
    assert "only planned" in judge.asked[0][0]["content"]


def test_llm_judge_bad_reply_counts_zero_and_is_reported():
    report = llm_report(FakeJudge(['{"results": [{"id": 99, "score": 1}]}']), conv(("x=1", 0)))
    assert report["any_evidence_mean"] == 0.0
    assert report["errors"] and "strategy id" in report["errors"][0]
    report = llm_report(FakeJudge(["no json at all"]), conv(("x=1", 0)))
    assert "no JSON object" in report["errors"][0]


def test_plans_in_prose_comments_and_strings_are_not_evidence():
    """#16: "augmentation" and "post-processing" were credited from comments."""
    plan = 'Path("plan.md").write_text("""Use nnU-Net with an Optuna search"""); print("ok")'
    comment = "x = 1  # TODO: ensemble the folds with test-time augmentation\n# augmentation\n# post-processing"
    strings = 'print("augment with RandFlipd, remove_small_objects, KFold, optuna")\nnote = "elastic"'
    r = by_key(heuristic_report(conv((plan, 0), (comment, 0), (strings, 0))))
    assert r["state_of_the_art"]["any_evidence"] == 0 and r["hyperparameter_search"]["any_evidence"] == 0
    assert r["post_processing"]["any_evidence"] == 0 and r["seed_fold_ensemble"]["any_evidence"] == 0
    assert r["augmentation"]["any_evidence"] == 0


SEARCH_SCRIPT = "Path('search.py').write_text('import optuna\\nstudy = optuna.create_study()\\nprint(study)')"


def test_a_script_counts_where_a_later_cell_runs_it():
    r = by_key(heuristic_report(conv((SEARCH_SCRIPT, 0))))  # written, never run: a plan in a file
    assert r["hyperparameter_search"]["any_evidence"] == 0
    r = by_key(heuristic_report(conv((SEARCH_SCRIPT, 0), ("python search.py", 0, "<Study>"))))
    assert r["hyperparameter_search"]["any_evidence"] == 1 and "cell 1" in r["hyperparameter_search"]["evidence"]


def test_code_that_never_runs_or_shows_nothing_is_not_evidence():
    dead = "import torch\nif False:\n    x = torch.flip(x, (0,))\nprint('ok')"
    uncalled = "import torch\ndef aug(x):\n    return torch.rot90(x)\nprint('defined')"
    swallowed = ("from scipy import ndimage\ntry:\n    lab, n = ndimage.label(mask)\nexcept Exception:\n    pass\n"
                 "print('ok')")
    silent = ("from skimage.morphology import remove_small_objects\nm = remove_small_objects(m, 4)", 0, "")
    r = by_key(heuristic_report(conv((dead, 0), (uncalled, 0), (swallowed, 0), silent)))
    assert r["augmentation"]["any_evidence"] == 0 and r["post_processing"]["any_evidence"] == 0
    called = uncalled + "\ny = aug(x)"
    assert by_key(heuristic_report(conv((called, 0))))["augmentation"]["any_evidence"] == 1


def test_capabilities_cli_on_a_run_folder(tmp_path, capsys):
    from pytest_automedbench.cli import main

    (tmp_path / "conversation.json").write_text(json.dumps(conv((OPTUNA, 0))))
    assert main(["capabilities", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "13  Optimising hyperparameters systematically          1  1.00  cell 0: optuna." in out
    assert main(["capabilities", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["strategies"][12]["any_evidence"] == 1
    assert main(["capabilities", str(tmp_path / "nope")]) == 2
    assert "expected a run folder holding conversation.json" in capsys.readouterr().out
