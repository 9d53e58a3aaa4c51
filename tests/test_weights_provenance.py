"""S2 weights_obtained by provenance (judge/reading/model_files.py, judge/replays/weights.py, the tracer's opens).

Real runs of the tiny task (local sandbox, traced cells) whose public data ships a JSON card of
thresholds under models/: the card counts as the task's weights in whatever format, when a cell
that ran read it (the tracer's record of opened files, wherever the code lives) and the outputs
change when the card's numbers are perturbed and the cells that carry it into the outputs are
replayed. Each way around that was tried is here: a card opened and never used, a copy of the card
(counts), a card of the agent's own with the same name, the values passed through a file to a later
writing cell (counts; unused: not), the card read in a child process, a forged open event.
"""
from __future__ import annotations

import json
import stat

import pytest
import yaml

from conftest import FIXTURES, run_steps

SOLVE = yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text())
PLAN, ENV, PILOT, FULL, SUBMIT = (s for s in SOLVE if "say" not in s)
HEAD = ("import os, json, nibabel as nib, numpy as np\npub, ws, out = os.environ['AMB_PUBLIC_DIR'], "
        "os.environ['AMB_WORKSPACE'], os.environ['AMB_OUTPUT_DIR']\nd = os.path.join(pub, 'images')\n"
        "card_path = os.path.join(pub, 'models', 'thresholds', 'model.json')\n")
SEGMENT = ("for f in sorted(os.listdir(d)):\n    img = nib.load(os.path.join(d, f))\n"
           "    pred = np.digitize(img.get_fdata(), cuts).astype(np.uint8)\n"
           "    nib.save(nib.Nifti1Image(pred, img.affine), os.path.join(out, f))\nprint(len(os.listdir(out)), 'outputs')\n")


def cell(code: str) -> dict:
    return {"execute_code": {"language": "python", "code": HEAD + code}}


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("weights_provenance")


@pytest.fixture(scope="module")
def carded(tiny):
    """The tiny task with a model card (thresholds, real numbers) in its public model folder."""
    task, data, root = tiny
    folder = data.public / "models" / "thresholds"
    for p in (data.public, data.public / "models", folder):
        if p.exists():
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.json").write_text(json.dumps({"name": "threshold model", "cuts": [50.0, 150.0]}))
    (folder / "features.py").write_text("def identity(x):\n    return x\n")
    return tiny




def weights(result) -> dict:
    return result["stage_evidence"]["S2"]["weights_obtained"]


def test_a_json_card_read_and_applied_counts_as_weights(carded):
    full = cell("card = json.load(open(card_path))\ncuts = card['cuts']\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, full, SUBMIT], "card-applied", replay_cells=1)
    assert ["public", "models/thresholds/model.json", "r"] in trace[2]["executed"]["opens"]
    verdict = trace[2]["replay"]["weights"]
    assert verdict["depends"] is True and verdict["cells"] == [2], verdict
    assert verdict["records"] == 3 and verdict["share"] == 1.0, verdict  # every case's mask moved
    assert weights(result)["met"], weights(result)
    # a model that is not a network (a card) is the model the device item looks for, by the file read
    on_device = result["stage_evidence"]["S2"]["model_on_device"]
    assert "model built in cell 2, which read public/models/thresholds/model.json" in on_device["evidence"], on_device


def test_a_model_that_made_a_sliver_of_the_outputs_earns_nothing(carded):
    """Quantities, not links (issue 36.4): the card makes one row of a 40-row table, a fixed rule the three
    masks; the perturbation moves 1 of 43 records, under the rubric's share, so the link does not pay."""
    sliver = cell("card = json.load(open(card_path))\ncuts = [50.0, 150.0]\n" + SEGMENT
                  + "rows = ['case,volume'] + [f'c{i},{i}' for i in range(39)] + [f'card,{card[\"cuts\"][0] * 2}']\n"
                  "open(os.path.join(out, 'volumes.csv'), 'w').write('\\n'.join(rows) + '\\n')\n")
    result, trace = run_steps(carded, [PLAN, ENV, sliver, SUBMIT], "card-sliver", replay_cells=1)
    verdict = trace[2]["replay"]["weights"]
    assert verdict["depends"] is True and (verdict["records"], verdict["records_changed"]) == (43, 1), verdict
    assert not weights(result)["met"], weights(result)
    assert "moved only 1 of 43 output records (2%)" in weights(result)["evidence"], weights(result)


def test_output_records_are_a_tables_rows_a_json_lists_items_or_a_file():
    from pytest_automedbench.judge.replays.weights import output_units

    def units(tmp, files):
        for name, text in files.items():
            (tmp / name).write_text(text)
        return output_units(tmp, list(files))

    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        got = units(tmp, {"a.csv": "case,y\nc1,1\nc2,2\nc1,3\n", "b.json": '[1, 2, {"k": 3}]',
                          "c.jsonl": '{"q": 1}\n\n{"q": 2}\n', "d.json": '{"x": 1, "y": [1]}', "e.nii.gz": "raw",
                          "f.csv": "only,header\nc1,1\n", "g.json": "not json"})
        assert sorted(got) == ["a.csv#c1", "a.csv#c1~2", "a.csv#c2", "b.json#0", "b.json#1", "b.json#2",
                               "c.jsonl#0", "c.jsonl#1", "d.json#x", "d.json#y", "e.nii.gz", "f.csv", "g.json"]
        before = dict(got)
        (tmp / "a.csv").write_text("case,y\nc2,2\nc1,1\nc1,4\n")  # reordered rows are the same records
        after = output_units(tmp, ["a.csv"])
        assert [k for k in after if after[k] != before[k]] == ["a.csv#c1~2"]


def test_a_card_opened_and_never_used_earns_nothing(carded):
    full = cell("card = json.load(open(card_path))\nprint(card['name'])\ncuts = [50.0, 150.0]\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, full, SUBMIT], "card-unused", replay_cells=1)
    assert trace[2]["replay"]["weights"]["depends"] is False
    assert not weights(result)["met"], weights(result)


def test_a_card_read_in_another_cell_than_the_writer_earns_nothing(carded):
    look = cell("card = json.load(open(card_path))\nprint(card)\n")
    full = cell("cuts = [50.0, 150.0]\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, look, full, SUBMIT], "card-elsewhere", replay_cells=1)
    assert not weights(result)["met"] and "read no model file" in weights(result)["evidence"], weights(result)


def test_a_copy_of_the_card_in_the_workspace_counts(carded):
    copy = {"execute_code": {"language": "bash", "code": 'cp "$AMB_PUBLIC_DIR/models/thresholds/model.json" my_card.json'}}
    full = cell("cuts = json.load(open(os.path.join(ws, 'my_card.json')))['cuts']\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, copy, full, SUBMIT], "card-copied", replay_cells=1)
    assert "a copy of models/thresholds/model.json" in weights(result)["evidence"], weights(result)
    assert weights(result)["met"] and trace[3]["replay"]["weights"]["perturbed"] == ["/workspace/my_card.json"]


def test_a_card_of_the_agents_own_with_the_same_name_is_not_the_models(carded):
    own = cell("os.makedirs(os.path.join(ws, 'models', 'thresholds'), exist_ok=True)\n"
               "json.dump({'name': 'mine', 'cuts': [50.0, 150.0]}, open(os.path.join(ws, 'models', 'thresholds', "
               "'model.json'), 'w'))\nprint('written')\n")
    full = cell("cuts = json.load(open(os.path.join(ws, 'models', 'thresholds', 'model.json')))['cuts']\n" + SEGMENT)
    result, _ = run_steps(carded, [PLAN, ENV, own, full, SUBMIT], "card-own", replay_cells=1)
    assert not weights(result)["met"], weights(result)


def test_values_passed_through_a_file_to_the_writing_cell_count(carded):
    derive = cell("np.save(os.path.join(ws, 'cuts.npy'), np.asarray(json.load(open(card_path))['cuts']))\n"
                  "print('saved')\n")
    full = cell("cuts = np.load(os.path.join(ws, 'cuts.npy'))\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, derive, full, SUBMIT], "card-through-file", replay_cells=1)
    verdict = trace[3]["replay"]["weights"]
    assert verdict["cells"] == [2, 3] and verdict["depends"] is True, verdict
    assert weights(result)["met"], weights(result)


def test_the_card_read_in_a_child_process_is_not_seen(carded):
    child = cell("import subprocess, sys\nsubprocess.run([sys.executable, '-c', "
                 "'import json, sys; json.load(open(sys.argv[1]))', card_path], check=True)\n"
                 "cuts = [50.0, 150.0]\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, child, SUBMIT], "card-child", replay_cells=1)
    assert not any(o[1].startswith("models/") for o in trace[2]["executed"]["opens"])
    assert not weights(result)["met"], weights(result)


def test_the_card_read_by_a_script_a_bash_cell_runs_counts(carded):
    """A bash cell's python children are traced (sandbox/childtrace.py): their opens are the cell's."""
    write = cell("open(os.path.join(ws, 'seg.py'), 'w').write("
                 + repr(HEAD + "card = json.load(open(card_path))\ncuts = card['cuts']\n" + SEGMENT) + ")\n")
    run = {"execute_code": {"language": "bash", "code": 'cd "$AMB_WORKSPACE" && python3 seg.py'}}
    result, trace = run_steps(carded, [PLAN, ENV, write, run, SUBMIT], "card-bash-child", replay_cells=1)
    assert ["public", "models/thresholds/model.json", "r"] in trace[3]["executed"]["opens"], trace[3]["executed"]
    assert weights(result)["met"], weights(result)
    unused = cell("open(os.path.join(ws, 'seg.py'), 'w').write("
                  + repr(HEAD + "card = json.load(open(card_path))\ncuts = [50.0, 150.0]\n" + SEGMENT) + ")\n")
    result, trace = run_steps(carded, [PLAN, ENV, unused, run, SUBMIT], "card-bash-child-unused", replay_cells=1)
    assert not weights(result)["met"], weights(result)  # read but unused: the replay sees no change


def test_a_forged_open_event_earns_nothing(carded):
    forged = cell("import sys\nsys.audit('open', card_path, 'r', 0)\ncuts = [50.0, 150.0]\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, forged, SUBMIT], "card-forged", replay_cells=1)
    assert trace[2]["executed"]["status"] == "tampered"
    hidden = cell("import sys\ngetattr(sys, 'au' + 'dit')('open', card_path, 'r', 0)\ncuts = [50.0, 150.0]\n" + SEGMENT)
    result, trace = run_steps(carded, [PLAN, ENV, hidden, SUBMIT], "card-forged-hidden", replay_cells=1)
    assert trace[2]["replay"]["weights"]["depends"] is False  # the forged read reaches the replay, which denies it
    assert not weights(result)["met"], weights(result)


def test_a_helper_modules_functions_are_read_for_the_device_and_the_model():
    from pytest_automedbench.judge.reading.code import read_cell
    from pytest_automedbench.judge.reading.model_files import _module_parts

    helper = ("import torch\nfrom monai.networks.nets import UNet\n"
              "DEVICE = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
              "def load(path):\n    net = UNet(spatial_dims=3, in_channels=1, out_channels=3, channels=(4, 8), strides=(2,))\n"
              "    net.load_state_dict(torch.load(path, map_location='cpu'))\n    return net.to(DEVICE).eval()\n")
    facts = [read_cell(part, "python") for part in _module_parts(helper)]
    assert any(f.device for f in facts) and any(f.models for f in facts)
    assert not any(f.models for f in facts[:1])  # the module's text alone: the function is never called there
