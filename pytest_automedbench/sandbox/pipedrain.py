"""The harness's side of a trace pipe (tracer.py, xtrace.py, childtrace.py): one thread drains it."""
from __future__ import annotations

import os


class PipeDrain:
    """Reads `read_fd` into `_data` until EOF, at most `cap` bytes; beyond them it keeps reading and
    drops what comes (a flooding cell never blocks on a full pipe) and sets `_over`. `clip`: keep exactly
    `cap` bytes (the last chunk cut) and count reaching the cap as over; else whole chunks until the cap."""

    cap = 0
    clip = False
    read_fd: int
    _data: bytearray
    _over: bool

    def _pump(self) -> None:
        try:
            while True:
                chunk = os.read(self.read_fd, 65536)
                if not chunk:
                    break
                if len(self._data) < self.cap:
                    self._data += chunk[:self.cap - len(self._data)] if self.clip else chunk
                    self._over = self._over or (self.clip and len(self._data) >= self.cap)
                else:
                    self._over = True
        except OSError:
            pass
