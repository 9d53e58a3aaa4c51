"""The one option table (session/options.py) and the one agent registry (agents/registry.py): every
row is well formed, each part's rows and its dataclass agree (names and defaults), and the options'
help, the checks and the factory all name the same built-in agents."""
from __future__ import annotations

import dataclasses

import pytest

from pytest_automedbench.agents import AgentError, make_agent
from pytest_automedbench.agents.registry import AGENT_FORMS, AGENT_KINDS, AGENT_NAMES, BRIDGED_KINDS, LLM_KINDS, \
    kind_of
from pytest_automedbench.session.options import BY_INI, OPTIONS, bridge_settings, executor_settings, reader, \
    sandbox_settings
from pytest_automedbench.session.settings import BridgeSettings, ExecutorSettings, SandboxOptions, SettingsError


class DefaultsConfig:
    """A pytest config with nothing on the command line: every option at its ini default."""

    def __init__(self, **given):
        self.given = given

    def getoption(self, ini):
        return self.given.get(ini)

    def getini(self, ini):
        opt = BY_INI[ini]
        return False if opt.switch else opt.default


def test_every_row_is_well_formed():
    names = [o.name for o in OPTIONS]
    assert len(names) == len(set(names))
    for o in OPTIONS:
        assert o.ini == "amb_" + o.name.replace("-", "_") and o.flag == "--amb-" + o.name
        assert o.part in ("session", "sandbox", "executor", "bridge")
        assert o.help and "[ini:" not in o.help  # the [ini: ...] suffix is added once, by add_to
        if o.switch:
            assert o.default is None and o.ini_help
        elif o.default is not None:
            o.type(o.default)  # the ini default converts with the row's type


@pytest.mark.parametrize("part, cls, read", [("executor", ExecutorSettings, executor_settings),
                                             ("bridge", BridgeSettings, bridge_settings)])
def test_a_parts_rows_and_its_dataclass_agree(part, cls, read):
    rows = {o.ini.removeprefix("amb_") for o in OPTIONS if o.part == part}
    fields = {f.name for f in dataclasses.fields(cls)}
    if part == "executor":
        rows = {"name" if r == "executor" else r for r in rows}
    assert rows == fields
    assert read(reader(DefaultsConfig())) == cls()  # the table's defaults are the dataclass's


def test_the_sandbox_defaults_agree():
    assert sandbox_settings(reader(DefaultsConfig())) == SandboxOptions()


def test_a_bad_value_names_its_option():
    with pytest.raises(SettingsError, match=r"--amb-archive-mb: expected float, got 'big'"):
        executor_settings(reader(DefaultsConfig(amb_archive_mb="big")))
    with pytest.raises(SettingsError, match="--amb-executor: expected local, ray, slurm, got 'k8s'"):
        executor_settings(reader(DefaultsConfig(amb_executor="k8s")))
    assert executor_settings(reader(DefaultsConfig(amb_executor="ray", amb_run_gpus="2"))) == \
        ExecutorSettings(name="ray", run_gpus=2)


def test_one_registry_for_help_checks_and_factory():
    assert AGENT_NAMES == tuple(k.name for k in AGENT_KINDS) and len(set(AGENT_NAMES)) == len(AGENT_NAMES)
    assert BRIDGED_KINDS == ("claude-code", "aide", "codex", "ml-master", "rdagent")
    assert LLM_KINDS == ("claude", "gpt", "openai")
    assert all(k.needs and k.example for k in AGENT_KINDS if k.argument == "required")
    assert kind_of("claude:claude-sonnet-4-6").family == "llm" and kind_of("mine:fast") is None
    assert BY_INI["amb_model"].help == f"agent under test: {AGENT_FORMS}"
    for kind in AGENT_KINDS:
        assert kind.form in AGENT_FORMS
    with pytest.raises(AgentError) as e:
        make_agent("cluade")
    assert AGENT_FORMS in str(e.value)


def test_the_checks_read_the_registry():
    from pytest_automedbench.session.validate import check_agent

    class NoPlugins:
        class hook:
            @staticmethod
            def pytest_amb_make_agent(**kw):
                return None

    with pytest.raises(SettingsError, match="openai: needs a model id, e.g. --amb-model=openai:gpt-4o-mini"):
        check_agent("openai:", NoPlugins())
    with pytest.raises(SettingsError, match="null takes no argument"):
        check_agent("null:x", NoPlugins())
    with pytest.raises(SettingsError) as e:
        check_agent("cluade", NoPlugins())
    assert str(e.value).startswith("--amb-model=cluade: unknown agent (did you mean claude?); built in: "
                                   + AGENT_FORMS)
    for spec in ("claude", "gpt", "codex:gpt-5", "aide", "reference"):
        check_agent(spec, NoPlugins())  # accepted without asking a plugin
