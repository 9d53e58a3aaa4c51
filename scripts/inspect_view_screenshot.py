"""Screenshot `inspect view` on a session's Inspect log (docs/results.md), in headless Chromium.

    python scripts/inspect_view_screenshot.py reports/inspect docs/inspect-view-demo.png [--sample RUN_ID]

Starts `inspect view --log-dir LOG_DIR` on a free loopback port, loads the log's page (or one
sample's page with --sample), waits until the viewer has rendered the scores, and saves a PNG.
Needs inspect-ai (the `test` extra) and Debian's chromium; drives it with tests/cdp.py.
"""
from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cdp import Browser  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url, timeout=5).read(1)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{url}: inspect view did not answer in {deadline_s:.0f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("log_dir")
    ap.add_argument("png")
    ap.add_argument("--sample", default=None, help="a run id: its sample's page instead of the log's")
    ap.add_argument("--wait-text", default="overall", help="text the page must show before the shot")
    ap.add_argument("--width", type=int, default=1500)
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen(["inspect", "view", "--log-dir", args.log_dir, "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}/"
        wait_http(base, 300)
        log = next(p for p in sorted(Path(args.log_dir).iterdir()) if p.suffix == ".json")
        url = base + f"#/logs/{log.name}" + (f"/samples/sample/{args.sample}/1/" if args.sample else "")
        with Browser(timeout=300) as b:
            page = b.open(url, width=args.width, height=1000)
            end = time.monotonic() + 300
            while time.monotonic() < end:
                if page.eval(f"document.body.innerText.includes({args.wait_text!r})"):
                    break
                time.sleep(1)
            else:
                raise SystemExit(f"{url}: the viewer never showed {args.wait_text!r}")
            time.sleep(3)  # the grid's last layout pass
            page.screenshot(Path(args.png), full_page=False)
            print(args.png, "errors:", page.errors[:3])
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
