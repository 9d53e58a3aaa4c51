"""Hand-built runs for the scoring tests: a careful run, and helpers to vary one thing in it."""
from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.metrics import TrackResult
from pytest_automedbench.metrics.base import CaseError

N_CASES = 3

GOOD_PLAN = """# Plan
We use SegResNet because it is light and accurate on brain MRI; alternatives considered: UNet, nnU-Net.
1. Inspect the images (shape, spacing, dtype) and the model card.
2. Load SegResNet weights on the available device.
3. Pilot on a single case and check the label set.
4. Run inference on every case and write one label volume per case.
5. Check the outputs are complete, then submit.
"""

ENV = "import torch, monai\nprint(torch.__version__, monai.__version__)"
# Each cell runs in its own process, so the cells that use the model load it again.
LOAD = ("import os, numpy as np, nibabel as nib, torch\nfrom monai.networks.nets import SegResNet\n"
        "net = SegResNet(out_channels=3)\nnet.load_state_dict(torch.load('/data/public/model.pt'))\n"
        "d = os.environ['AMB_PUBLIC_DIR'] + '/images'\ncases = sorted(os.listdir(d))\n")
WEIGHTS = (LOAD + "device = 'cuda' if torch.cuda.is_available() else 'cpu'\nnet = net.to(device)\n"
           "print('weights loaded on', device)")
COMPAT = ("import os, nibabel as nib\nd = os.environ['AMB_PUBLIC_DIR'] + '/images'\n"
          "img = nib.load(os.path.join(d, sorted(os.listdir(d))[0]))\n"
          "print(img.shape, img.header.get_zooms(), img.get_data_dtype())")
PILOT = (LOAD + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = net(x).argmax(1)\n"
         "print(np.unique(pred), pred.shape)\nassert set(np.unique(pred).tolist()) <= {0, 1, 2}")
FULL = (LOAD + "out = os.environ['AMB_OUTPUT_DIR']\nfor c in cases:\n"
        "    pred = net(nib.load(os.path.join(d, c)).get_fdata()).argmax(1)\n"
        "    nib.save(nib.Nifti1Image(pred, None), os.path.join(out, c))")
CHECK = "import os\nfiles = os.listdir(os.environ['AMB_OUTPUT_DIR'])\nprint(len(files), 'outputs')\nassert len(files) == 3"
RANGE_CHECK = ("import os, numpy as np, nibabel as nib\nout = os.environ['AMB_OUTPUT_DIR']\n"
               "labels = np.unique(nib.load(os.path.join(out, sorted(os.listdir(out))[0])).get_fdata())\n"
               "print(labels, 'labels')\nassert set(labels.tolist()) <= {0, 1, 2}")
PRINTS = {ENV: "2.1.0 1.3.0\n", WEIGHTS: "weights loaded on cpu\n", COMPAT: "(8, 8, 8) (1.0, 1.0, 1.0) uint8\n",
          PILOT: "[0 1 2] (8, 8, 8)\n", CHECK: "3 outputs\n", RANGE_CHECK: "[0. 1. 2.] labels\n"}


def cell(code: str, *, outputs: int = 0, exit_code: int = 0, stderr: str = "", stdout: str | None = None,
         timed_out: bool = False, blocked: str | None = None) -> dict:
    """A cell; by default it printed what such a cell prints (nothing for unknown code)."""
    return {"code": code, "outputs": outputs, "exit_code": exit_code, "stderr": stderr,
            "stdout": PRINTS.get(code, "") if stdout is None else stdout, "timed_out": timed_out, "blocked": blocked}


def good_cells() -> list[dict]:
    return [
        cell("open('plan.md', 'w').write(PLAN)"),
        cell(ENV),
        cell(WEIGHTS),
        cell(COMPAT),
        cell(PILOT),
        cell(FULL, outputs=N_CASES),
        cell(CHECK, outputs=N_CASES),
    ]


def edit(cells: list[dict], old: str, new: str) -> list[dict]:
    """The same run with `old` replaced by `new` in every cell's code (what it printed kept)."""
    return [dict(c, code=c["code"].replace(old, new)) for c in cells]


def make_record(cells: list[dict], *, said: dict[int, str] | None = None, submitted: bool = True,
                limit_hit: str | None = None, violations=None, disqualified: bool = False) -> RunRecord:
    """One assistant turn per cell (text from `said[turn]`), then submit_results if `submitted`."""
    said = said or {}
    rec = RunRecord(conversation=[{"role": "system", "content": "s"}, {"role": "user", "content": "brief"}])
    for i, c in enumerate(cells):
        rec.conversation.append({"role": "assistant", "content": said.get(i, ""),
                                 "tool_calls": [{"id": f"c{i}", "name": "execute_code", "arguments": {}}]})
        rec.trace.append(TraceEvent(index=i, turn=i, tool=c.get("tool", "execute_code"), started_s=float(i),
                                    language=c.get("language", "python"), code=c["code"], stdout=c["stdout"],
                                    stderr=c["stderr"], exit_code=c["exit_code"], timed_out=c["timed_out"],
                                    blocked=c["blocked"], outputs_after=c["outputs"], cases_after=c["outputs"]))
    n = len(cells)
    if submitted:
        rec.conversation.append({"role": "assistant", "content": said.get(n, ""),
                                 "tool_calls": [{"id": "s", "name": "submit_results", "arguments": {}}]})
        rec.trace.append(TraceEvent(index=n, turn=n, tool="submit_results", started_s=float(n),
                                    outputs_after=cells[-1]["outputs"] if cells else 0,
                                    cases_after=cells[-1]["outputs"] if cells else 0))
        rec.ended_by = "submit"
    else:
        rec.conversation.append({"role": "assistant", "content": said.get(n, "")})
        rec.ended_by = "limit" if limit_hit else "no_tool_call"
    rec.turns = n + 1
    rec.submitted = submitted
    rec.limit_hit = limit_hit
    rec.violations = list(violations or [])
    rec.disqualified = disqualified
    return rec


def draw_diagram(path: Path) -> None:
    """A small pipeline diagram: three labelled boxes joined by arrows."""
    im = Image.new("RGB", (420, 160), "white")
    d = ImageDraw.Draw(im)
    for i, name in enumerate(("load", "model", "save")):
        x = 20 + 140 * i
        d.rectangle([x, 50, x + 100, 110], outline="black", fill=(200, 220, 255))
        d.text((x + 30, 72), name, fill="black")
        if i < 2:
            d.line([x + 100, 80, x + 140, 80], fill="red", width=3)
    im.save(path)


def make_workspace(root: Path, *, plan: str | None = GOOD_PLAN, png: str | None = "diagram") -> Path:
    """A workspace with plan.md (unless None) and plan.png: 'diagram', 'blank' or None."""
    ws = root / "workspace"
    (ws / "outputs").mkdir(parents=True, exist_ok=True)
    (ws / "model.pt").write_bytes(b"weights")  # the file the careful run's torch.load reads
    if plan is not None:
        (ws / "plan.md").write_text(plan)
    if png == "diagram":
        draw_diagram(ws / "plan.png")
    elif png == "blank":
        Image.new("RGB", (420, 160), "white").save(ws / "plan.png")
    return ws


def track_result(n_valid: int = N_CASES, score: float = 0.9, errors: list[tuple[str, str]] = (),
                 extra_files: list[str] = ()) -> TrackResult:
    return TrackResult(score=score, n_cases=N_CASES, n_valid=n_valid,
                       case_errors=[CaseError(c, p) for c, p in errors], extra_files=list(extra_files))
