"""Bridged agents: third-party agent programs run unmodified in the sandbox, their model calls
through the LLM gateway.

An `Adapter` is one small module per agent program (Harbor's installed agents are the model): it
*declares* how to install the program into the agents folder, lays out the task for it under
``/workspace/.agent`` (the agent's own config and logs, never scored), names its command and
environment, and converts its native log into trace events after the run.

`BridgedAgent` is the ``command:`` agent (`command.CommandAgent`: one bash cell, the brief on its
stdin, submitted = exit 0) with the gateway around it: it opens a run at the gateway (a random
token, the run's limits: ``--amb-max-turns`` counts LLM calls, ``--amb-max-tokens``,
``--amb-max-cost``), starts the program under the in-cell forwarder (which exports every base-URL
variable and the token as every API key, and ends the program's process group when the gateway
ends the run), revokes the token when the cell ends, and puts the gateway's ``llm_call`` events and
the converted native events into the trace; tokens and cost come from the llm_call events only.

Infrastructure, not the agent (the one rule of docs/agents.md, "Infrastructure failures"): the
gateway keeps every model call that failed on the upstream's side (no connection, a timeout, a 5xx,
a 429, the harness's key refused) and ends the run after ``runs.UPSTREAM_GIVE_UP`` of them in a row.
A run the gateway ended so, a run none of whose model calls was answered, and a run that did not
submit after its last model call failed upstream raise `UpstreamError`: the test is an ERROR, the
run is saved ``errored`` and kept out of the scores. A call the provider refused for what the agent
sent (malformed, too large, over the context) stays the agent's outcome.
"""
from __future__ import annotations

import os

import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from dataclasses import replace

from ..base import AgentError
from .snapshots import AgentClock, BoundarySnapshots, cgroups_of
from ...record.trace import Usage
from ..command import CommandAgent

AGENT_DIR = ".agent"  # under the workspace: the agent's own config and logs
TRANSCRIPT = "transcript.jsonl"  # in the run folder: the gateway's record of the model's responses
# room the cell's hard timeout leaves for the boundary snapshots (their time is not the agent's)
HARNESS_ALLOWANCE, HARNESS_ALLOWANCE_MIN_S, HARNESS_ALLOWANCE_MAX_S = 0.1, 30.0, 600.0


class UpstreamError(AgentError):
    """The model provider behind the gateway failed the run (an infrastructure error, see the module doc).

    ``signature`` (kind, status and URL of the last failure) lets the session count identical outages."""

    def __init__(self, message: str, failures: list[dict[str, Any]]):
        super().__init__(message)
        self.failures = failures
        last = failures[-1] if failures else {}
        self.signature = f"{last.get('kind')} {last.get('status') or ''} {last.get('url')}".replace("  ", " ")


def upstream_outage(binding, submitted: bool) -> str | None:
    """Why the run is an infrastructure error for its upstream (see the module doc), or None."""
    from ...gateway.runs import describe_upstream

    failures = binding.upstream_failures
    if not failures:
        return None
    if binding.upstream_down:
        return f"the gateway ended the run: {binding.upstream_down}"
    calls = [c for c in binding.calls if c.counted]
    if not any(c.status == 200 for c in calls):
        return (f"none of the run's {len(calls)} model call(s) was answered; the last upstream failure: "
                f"{describe_upstream(failures[-1])}")
    if binding.upstream_failing() and not submitted:
        return f"the run's last model call failed on the upstream's side: {describe_upstream(failures[-1])}"
    return None


class InstallError(AgentError):
    """An agent program could not be installed (or is not installed where the run needs it)."""


@dataclass
class Launch:
    """What an adapter asks the cell to run."""

    command: str  # shell command (bash), run under the forwarder with the brief on stdin
    env: dict[str, str] = field(default_factory=dict)  # exported before it (values may use $VARS)


class Adapter:
    """One agent program. Subclasses set `name` and override what differs."""

    name = "adapter"
    default_model: str | None = None
    # True: the program runs tools the model calls (claude-code, codex): its trace is built from the
    # gateway's tool calls (`gateway_event`). False: it runs code it takes from the response text.
    tool_calls = False

    def __init__(self, model: str | None = None):
        self.model = model or self.default_model

    # -- install (on the host, once, into the agents folder)
    def install_dir(self, agents_dir: Path) -> Path:
        return agents_dir / self.name

    def installed(self, agents_dir: Path) -> bool:
        raise NotImplementedError

    def install(self, agents_dir: Path) -> Path:
        raise NotImplementedError

    # -- per run
    def layout(self, workspace: Path, brief: str) -> None:
        """Write the agent's own config under workspace/.agent before it starts (nothing by default)."""

    def launch(self, agents_dir: Path, limits: Any) -> Launch:
        raise NotImplementedError

    def convert(self, workspace: Path) -> list[dict[str, Any]]:
        """The native log as trace events: dicts with `tool`, `started_s` (None: unknown) and
        TraceEvent fields (an ``execute_code`` event is a code cell the judge can read)."""
        return []

    def gateway_event(self, name: Any, arguments: Any) -> dict[str, Any]:
        """A tool call as the gateway served it, as a trace event (tool-calling adapters)."""
        raise NotImplementedError

    def not_observable(self) -> list[str]:
        """Stage items the judge cannot observe for this agent (reported, never fabricated)."""
        return []


class NpmAdapter(Adapter):
    """An agent shipped as an npm package: installed with npm into its folder, run from node_modules/.bin."""

    package = ""
    bin_name = ""
    version_env = ""  # a variable that pins the package's version

    def binary(self, agents_dir: Path) -> Path:
        return self.install_dir(agents_dir) / "node_modules" / ".bin" / self.bin_name

    def installed(self, agents_dir: Path) -> bool:
        return self.binary(agents_dir).exists()

    def install(self, agents_dir: Path) -> Path:
        import os
        import subprocess

        folder = self.install_dir(agents_dir)
        folder.mkdir(parents=True, exist_ok=True)
        version = os.environ.get(self.version_env) if self.version_env else None
        spec = f"{self.package}@{version}" if version else self.package
        try:
            out = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), spec],
                                 capture_output=True, text=True, timeout=900)
        except FileNotFoundError:
            raise InstallError(f"{self.name} needs npm (Node.js) to install") from None
        if out.returncode != 0 or not self.installed(agents_dir):
            raise InstallError(f"npm install {spec} failed: {out.stderr.strip()[-800:]}")
        return folder


def venv_install(venv: Path, *pip_args: list[str], timeout_s: float = 900) -> None:
    """A venv ``--system-site-packages`` over the harness's interpreter (the agent's generated code
    gets the harness's ML stack), then one ``pip install`` per argument list; InstallError on a failure."""
    import subprocess
    import sys

    python = str(venv / "bin" / "python")
    steps = [[sys.executable, "-m", "venv", "--system-site-packages", str(venv)]]
    steps += [[python, "-m", "pip", "install", "-q", *args] for args in pip_args]
    for step in steps:
        out = subprocess.run(step, capture_output=True, text=True, timeout=timeout_s)
        if out.returncode != 0:
            raise InstallError(f"{' '.join(step[:6])} ... failed: {out.stderr.strip()[-800:]}")


def bridged_cell(socket_path: Path, forwarder: Path, token: str, launch: Launch) -> str:
    """The cell's shell command: the environment, then the program under the forwarder."""
    lines = ["set -o pipefail", f"export AMB_GATEWAY_TOKEN={shlex.quote(token)}",
             'mkdir -p "$AMB_WORKSPACE/.agent"']
    lines += [f"export {key}={value}" for key, value in launch.env.items()]
    python = '"$(command -v python3 || echo /usr/bin/python3)"'
    lines.append(f"exec {python} {shlex.quote(str(forwarder))} --socket {shlex.quote(str(socket_path))} -- "
                 f"bash -o pipefail -c {shlex.quote(launch.command)}")
    return "\n".join(lines)


def hand_to_workspace_owner(folder: Path) -> None:
    """The harness laid out `folder` inside the workspace after the sandbox gave the workspace to its
    cell user: hand it over the same way, or the agent cannot write its own logs there."""
    from ...sandbox.celluser import give_tree

    owner = folder.parent.stat()
    if (owner.st_uid, owner.st_gid) != (os.geteuid(), os.getegid()):
        give_tree(folder, owner.st_uid, owner.st_gid)


def refuse_remote_docker(sandbox) -> None:
    """A Docker engine on another machine cannot bind the gateway's local socket: refused, with why."""
    import os

    host = os.environ.get("DOCKER_HOST", "")
    if "docker" in str(getattr(sandbox, "name", "")) and host and not host.startswith("unix://"):
        raise AgentError(f"bridged agents need the gateway's unix socket inside the container, and DOCKER_HOST={host} "
                         "is not a local engine: use a local Docker engine or --amb-sandbox=local")


class BridgedAgent(CommandAgent):
    """``--amb-model=<adapter>[:MODEL]``: see the module doc."""

    bridged = True

    def __init__(self, adapter: Adapter, routes: Mapping[str, Any], agents_dir: Path,
                 prices: Mapping[str, Any] | None = None, gateway=None):
        super().__init__(command="")
        self.adapter, self.routes, self.agents_dir = adapter, dict(routes), Path(agents_dir)
        self.name = adapter.name + (f":{adapter.model}" if adapter.model else "")
        self.model_id = self.routes["chat"].model
        self.prices = prices
        self._gateway = gateway

    @property
    def gateway(self):
        if self._gateway is None:
            from ...gateway import shared_gateway

            self._gateway = shared_gateway()
        return self._gateway

    def provenance(self) -> dict[str, Any]:
        """What the runner adds to result.json's provenance: the bridge and the models by role."""
        return {"bridged": self.adapter.name,
                "agent_models": {role: f"{r.wire}:{r.model}" for role, r in self.routes.items()},
                "not_observable": self.adapter.not_observable()}

    def program_folders(self) -> list[Path]:
        return [self.gateway.folder, self.adapter.install_dir(self.agents_dir)]

    def prepare(self) -> None:
        if not self.adapter.installed(self.agents_dir):
            raise InstallError(f"{self.adapter.name} is not installed in {self.agents_dir}; run "
                               f"`automedbench agents install {self.adapter.name} --agents-dir {self.agents_dir}`")

    def _cost_fn(self):
        from ...llm.pricing import cost_usd

        def cost(model: str, usage: dict) -> float | None:
            value = cost_usd(model, usage, self.prices)
            return None if value is None else round(value, 10)
        return cost

    def run(self, ctx) -> None:
        from ...gateway import RunLimits

        self.prepare()
        refuse_remote_docker(ctx.sandbox)
        lim = ctx.limits
        workspace = ctx.output_dir.parent
        gw = self.gateway
        binding = gw.open_run(workspace.name, self.routes, RunLimits(max_calls=lim.max_turns, max_tokens=lim.max_tokens,
                                                                     max_cost_usd=lim.max_cost_usd),
                              cost_fn=self._cost_fn())
        offset = binding.opened - ctx.started
        opened_wall = time.time()
        (workspace / AGENT_DIR).mkdir(exist_ok=True)
        self.adapter.layout(workspace, ctx.brief)
        hand_to_workspace_owner(workspace / AGENT_DIR)
        launch = self.adapter.launch(self.agents_dir, lim)
        # the deadline, told to the program with a margin (the runner's cell timeout is the hard one)
        left = lim.time_limit_s - (self.clock() - ctx.started)
        launch.env.setdefault("TIME_LIMIT_SECS", str(max(30, int(left - max(30.0, 0.05 * left)))))
        self.command = bridged_cell(gw.socket_path, gw.forwarder_path, binding.token, launch)
        # the harness's snapshots at every tool-call boundary (snapshots.py), the first one now
        snaps = BoundarySnapshots(workspace, cgroups_of(ctx.sandbox))
        snaps("opened", [])
        binding.code_in_text = not self.adapter.tool_calls
        binding.on_tool_boundary = snaps
        binding.harness_s = snaps.seconds()
        # their time is not the agent's: the gateway ends the run on the agent's own time, the cell's
        # timeout is a backstop with room for the snapshots
        allowance = min(HARNESS_ALLOWANCE_MAX_S, max(HARNESS_ALLOWANCE_MIN_S, HARNESS_ALLOWANCE * left))
        run_ctx = replace(ctx, limits=replace(lim, time_limit_s=lim.time_limit_s + allowance))
        try:
            with AgentClock(binding, ctx.started, lim.time_limit_s, self.clock):
                super().run(run_ctx)
        finally:
            gw.close_run(binding)
            binding.on_tool_boundary = None
            snaps("ended", [])
            ctx.record.harness_s = round(snaps.seconds(), 3)  # the loop adds its own to it
            self._account(ctx.record, binding, offset, opened_wall, workspace, snaps)
        outage = upstream_outage(binding, ctx.record.submitted)
        if outage:
            ctx.record.ended_by = "upstream_error"
            raise UpstreamError(f"{self.adapter.name}: infrastructure error, not the agent's: {outage}",
                                list(binding.upstream_failures))

    def _account(self, record, binding, offset: float, opened_wall: float, workspace: Path,
                 snaps: "BoundarySnapshots | None" = None) -> None:
        from .corroborate import text_code_events, tool_call_events
        from .events import merge_events

        totals = binding.totals()
        record.usage = Usage(**totals["usage"])
        record.api_calls = totals["calls"]
        record.cost_usd = totals["cost_usd"]
        from ...gateway.runs import describe_upstream

        record.api_faults.extend({"upstream": True, "fault": describe_upstream(f), **f}
                                 for f in binding.upstream_failures)
        if binding.limit_hit:  # the gateway refused a call and ended the program: scored on what it wrote
            record.limit_hit = record.limit_hit or binding.limit_hit
            record.ended_by = "limit"
        try:
            native = self.adapter.convert(workspace)
        except Exception as exc:  # noqa: BLE001 - an unreadable native log is the agent's, not a harness fault
            native = [{"tool": "agent_log", "started_s": None, "stderr": f"native log not read: {exc}"[:500]}]
        write_transcript(workspace.parent / TRANSCRIPT, binding.transcript)
        # the gateway's record is the transcript of record; the native log is corroborated against it
        if self.adapter.tool_calls:
            native = tool_call_events(self.adapter, binding.transcript, native)
        else:
            native = text_code_events(binding.transcript, native)
        launcher = record.code_cells()[0] if record.code_cells() else None
        if snaps is not None:
            snaps.attach(native, launcher)
            self.snapshot_summary = snaps.summary()
        merge_events(record, binding.calls, native, offset, opened_wall)
        if launcher is not None and snaps is not None:  # the program's own cell: what came after the last boundary
            rest = [e for e in record.trace if e is not launcher]
            submit = [e for e in rest if e.tool == "submit_results"]
            record.trace[:] = [e for e in rest if e.tool != "submit_results"] + [launcher] + submit
            for i, event in enumerate(record.trace):
                event.index = i


def write_transcript(path: Path, transcript: list[dict[str, Any]]) -> None:
    """The gateway's record, one response a line, into the run folder (outside the workspace)."""
    import json

    from ...util.atomic_files import atomic_write

    try:
        atomic_write(path, "".join(json.dumps(e, default=str) + "\n" for e in transcript))
    except OSError:
        pass  # the run folder's own writes report a full disk; the trace still holds the events
