"""A tiny Chrome DevTools Protocol client over --remote-debugging-pipe (standard library only), for
testing index.html in Debian's headless Chromium: load a page, collect console errors and
uncaught exceptions, evaluate JavaScript, take full-page screenshots. No browser is downloaded.

    with Browser() as b:
        page = b.open(path.as_uri(), width=1400)
        assert not page.errors
        page.screenshot(out_png)
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--no-first-run", "--disable-quic", "--disable-extensions", "--disable-dev-shm-usage",
         "--hide-scrollbars", "--mute-audio", "--remote-debugging-pipe"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class CDPError(Exception):
    pass


def _high(fd: int) -> int:
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return new


class Browser:
    def __init__(self, timeout: float = 120.0):
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="amb-chromium-")
        # Pipe ends numbered above 4, so the child's dup2 onto 3 and 4 cannot clobber one of them.
        to_browser_r, self._to_browser = (_high(fd) for fd in os.pipe())
        self._from_browser, from_browser_w = (_high(fd) for fd in os.pipe())
        # The browser reads commands on fd 3 and writes replies on fd 4.
        self.proc = subprocess.Popen(
            [chromium(), *FLAGS, f"--user-data-dir={self.profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []

    # -- the protocol ------------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            reply = self._read()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise CDPError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise CDPError(f"{method}: no reply in {self.timeout} s")

    def _read(self) -> dict:
        while b"\0" not in self._buf:
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise CDPError("the browser closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_event(self, method: str, session: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = 0
        while time.monotonic() < deadline:
            for e in self.events[seen:]:
                if e.get("method") == method and e.get("sessionId") == session:
                    return e
            seen = len(self.events)
            self.events.append(self._read())
        raise CDPError(f"no {method} in time")

    def open(self, url: str, width: int = 1400, height: int = 900) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        start = len(self.events)
        self.send("Page.navigate", {"url": url}, session)
        self.wait_event("Page.loadEventFired", session)
        return Page(self, session, start, width)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (CDPError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self.profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str, first_event: int, width: int):
        self.browser, self.session, self.first_event, self.width = browser, session, first_event, width

    def eval(self, expression: str):
        """The value of a JavaScript expression (JSON-serialisable); raises on a thrown exception."""
        r = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                   "awaitPromise": True}, self.session)
        if "exceptionDetails" in r:
            raise CDPError(f"{expression[:80]}: {r['exceptionDetails'].get('text')} "
                           f"{r['exceptionDetails'].get('exception', {}).get('description', '')}")
        return r.get("result", {}).get("value")

    @property
    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries since the page was opened."""
        out = []
        for e in self.browser.events[self.first_event:]:
            if e.get("sessionId") != self.session:
                continue
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}")
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        height = 900
        if full_page:
            height = int(self.eval("Math.ceil(document.documentElement.scrollHeight)"))
        shot = self.browser.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": full_page,
            "clip": {"x": 0, "y": 0, "width": self.width, "height": height, "scale": 1}}, self.session)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(base64.b64decode(shot["data"]))
        return Path(path)
