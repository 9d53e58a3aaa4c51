"""Train the tiny MONAI UNet shipped with the demo segmentation task (``brain_unet.pt``).

Reproducible on CPU in a few minutes::

    python task_suites/demo/segmentation/train_brain_unet.py [--out PATH] [--iters N]

Training and validation cases come from the same augmentation code as the task data
(``pytest_automedbench.data.demo_segmentation``) with seeds 1000 and 2000, as rigid copies only:
the task's cases are also smoothly deformed, from a secret seed drawn when the data are prepared,
so the network is tested on brains it has never seen deformed. No choice here is made on any
task case; the Dice on rigid seed-0 copies is printed at the end for the record.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pytest_automedbench.data import demo_segmentation as ds  # noqa: E402

TRAIN_SEED, VAL_SEED, EVAL_SEED = 1000, 2000, 0
N_TRAIN, N_VAL, N_EVAL = 24, 4, 6
PATCH = (64, 64, 64)
BATCH = 2


def make_net() -> torch.nn.Module:
    from monai.networks.nets import UNet

    return UNet(**ds.MODEL_KWARGS)


def load_cases(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    for _, image, label in ds.iter_cases(n, seed):
        images.append(ds.normalise(image))
        labels.append(label)
    return np.stack(images)[:, None], np.stack(labels)[:, None].astype(np.int64)


def random_batch(images, labels, rng: np.random.Generator):
    xs, ys = [], []
    shape = images.shape[2:]
    for _ in range(BATCH):
        c = rng.integers(len(images))
        start = [rng.integers(0, s - p + 1) for s, p in zip(shape, PATCH)]
        sl = tuple(slice(a, a + p) for a, p in zip(start, PATCH))
        xs.append(images[c][(slice(None),) + sl])
        ys.append(labels[c][(slice(None),) + sl])
    return torch.from_numpy(np.stack(xs)), torch.from_numpy(np.stack(ys))


@torch.no_grad()
def dice(net, images, labels) -> np.ndarray:
    """Per-class Dice (GM, WM) averaged over cases, MONAI DiceMetric without background."""
    from monai.metrics import DiceMetric
    from monai.networks.utils import one_hot

    net.eval()
    metric = DiceMetric(include_background=False, reduction="mean_batch")
    for x, y in zip(images, labels):
        pred = net(torch.from_numpy(x[None])).argmax(1, keepdim=True)
        metric(one_hot(pred, 3), one_hot(torch.from_numpy(y[None]), 3))
    net.train()
    return metric.aggregate().numpy()


def main(argv=None) -> int:
    from monai.losses import DiceCELoss

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "brain_unet.pt")
    ap.add_argument("--iters", type=int, default=800)
    ap.add_argument("--lr", type=float, default=3e-3)
    args = ap.parse_args(argv)

    torch.set_num_threads(2)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(0)

    t0 = time.time()
    tr_x, tr_y = load_cases(N_TRAIN, TRAIN_SEED)
    va_x, va_y = load_cases(N_VAL, VAL_SEED)
    print(f"data: {N_TRAIN} train + {N_VAL} val cases of {tr_x.shape[2:]} "
          f"in {time.time() - t0:.1f}s", flush=True)

    net = make_net()
    loss_fn = DiceCELoss(to_onehot_y=True, softmax=True)
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.iters)

    t1 = time.time()
    running = None
    for it in range(1, args.iters + 1):
        x, y = random_batch(tr_x, tr_y, rng)
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        if it % 100 == 0 or it == args.iters:
            print(f"iter {it:5d}  loss {running:.4f}  ({time.time() - t1:.0f}s)", flush=True)
    train_time = time.time() - t1

    val = dice(net, va_x, va_y)
    print(f"final training loss (EMA): {running:.4f}")
    print(f"training time: {train_time:.1f}s")
    print(f"validation Dice (seed {VAL_SEED}): GM {val[0]:.4f}  WM {val[1]:.4f}  "
          f"mean {val.mean():.4f}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().clone().contiguous() for k, v in net.state_dict().items()}
    torch.save(state, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")

    ev_x, ev_y = load_cases(N_EVAL, EVAL_SEED)
    ev = dice(net, ev_x, ev_y)
    print(f"evaluation Dice (task cases, seed {EVAL_SEED}, for the record): GM {ev[0]:.4f}  "
          f"WM {ev[1]:.4f}  mean {ev.mean():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
