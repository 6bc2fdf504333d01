"""The pytest plugin (``agentplug.testing.pytest_plugin``), exercised with pytest's ``pytester``.

Until the ``pytest11`` entry point is installed, the inner sessions load the plugin with
``-p agentplug.testing.pytest_plugin``; once it is installed they rely on the entry point (loading
the module twice under two names would be an error).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import importlib_metadata
import pytest

pytest_plugins = ["pytester"]


def _entry_point_installed() -> bool:
    return any(
        ep.name == "agentplug" and ep.value == "agentplug.testing.pytest_plugin"
        for ep in importlib_metadata.entry_points(group="pytest11")
    )


PLUGIN_ARGS: tuple[str, ...] = (
    () if _entry_point_installed() else ("-p", "agentplug.testing.pytest_plugin")
)

PREFLIGHT = """
from agentplug import hookimpl

PLUGIN_ID = "tool-preflight"


@hookimpl(priority=50)
def before_tool_call(event):
    if event.tool_name == "web_search":
        return {"require_approval": {"title": "Run web search", "description": "searches"}}
    if event.tool_name == "exec":
        return {"block": True, "block_reason": "exec is not allowed"}
    if event.tool_name == "boom":
        raise ValueError("kaboom")
    return None
"""

CONFIGURED = """
def register(api):
    def rewrite(event):
        return {"params": {**event.params, "limit": api.plugin_config.get("limit", 1)}}

    api.on("before_tool_call", rewrite, priority=10)
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*PLUGIN_ARGS, "-p", "no:cacheprovider", *args)


def _fake_dist(
    pytester: pytest.Pytester, dist: str, group: str, entry_points: dict[str, str]
) -> None:
    """A dist-info on the inner session's ``sys.path`` declaring ``entry_points``."""
    info = pytester.path / f"{dist}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8"
    )
    lines = [f"[{group}]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


# -- fixtures --------------------------------------------------------------------------


def test_fixtures_register_and_dispatch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preflight=PREFLIGHT, configured=CONFIGURED)
    pytester.makepyfile(
        test_plugin="""
        import pytest
        import preflight

        def test_object(agentplug_host, agentplug_load, agentplug_dispatch):
            record = agentplug_load(preflight)
            assert record.plugin_id == "tool-preflight" and record.bundled
            result = agentplug_dispatch("before_tool_call", {"tool_name": "exec"})
            assert result.outcome.blocked and result.outcome.blocked_by == "tool-preflight"
            assert [p.plugin_id for p in agentplug_host.plugins] == ["tool-preflight"]

        def test_module_path(agentplug_load, agentplug_dispatch):
            assert agentplug_load("preflight").plugin_id == "tool-preflight"
            assert agentplug_load("module:configured", "cfg").plugin_id == "cfg"
            result = agentplug_dispatch("before_tool_call", {"tool_name": "ls", "params": {}})
            assert result.outcome.params == {"limit": 1}

        @pytest.mark.agentplug_config({"plugins": {"entries": {"cfg": {"config": {"limit": 7}}}}})
        def test_config_marker(agentplug_config, agentplug_load, agentplug_dispatch):
            assert agentplug_config["plugins"]["entries"]["cfg"]["config"] == {"limit": 7}
            agentplug_load("configured:register", "cfg")
            result = agentplug_dispatch("before_tool_call", {"tool_name": "ls"})
            assert result.outcome.params == {"limit": 7}

        def test_sync_hook(agentplug_load, agentplug_dispatch):
            def register(api):
                api.on("before_message_write", lambda event: {"block": True})
            agentplug_load(register, "dropper")
            result = agentplug_dispatch("before_message_write", {"message": {"role": "user"}})
            assert result.outcome.blocked_by == "dropper"

        def test_async_test_uses_the_host_directly(agentplug_host, agentplug_load):
            import asyncio
            agentplug_load(preflight)
            result = asyncio.run(
                agentplug_host.dispatch("before_tool_call", {"tool_name": "exec"})
            )
            assert result.outcome.blocked

        def test_sync_helper_refuses_a_running_loop(agentplug_dispatch):
            import asyncio

            async def inner():
                agentplug_dispatch("agent_end", {})

            with pytest.raises(RuntimeError, match="running event loop"):
                asyncio.run(inner())
        """
    )
    result = _run(pytester, "--strict-markers")
    result.assert_outcomes(passed=6)


def test_config_fixture_override_and_module_marker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(configured=CONFIGURED)
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def agentplug_config():
            return {"plugins": {"entries": {"cfg": {"config": {"limit": 3}}}},
                    "runtime": {"default_timeout_ms": 1000}}
        """
    )
    pytester.makepyfile(
        test_override="""
        import pytest

        pytestmark = pytest.mark.agentplug_config(runtime={"shutdown_timeout_ms": 200})

        def test_conftest_value(agentplug_host, agentplug_load, agentplug_dispatch):
            agentplug_load("configured:register", "cfg")
            assert agentplug_dispatch("before_tool_call", {"tool_name": "x"}).outcome.params == {
                "limit": 3
            }
            # the module marker is merged deeply over the conftest fixture
            assert agentplug_host.config.runtime.default_timeout_ms == 1000
            assert agentplug_host.config.runtime.shutdown_timeout_ms == 200

        @pytest.mark.agentplug_config({"plugins": {"entries": {"cfg": {"config": {"limit": 9}}}}})
        def test_closest_marker_wins(agentplug_load, agentplug_dispatch):
            agentplug_load("configured:register", "cfg")
            outcome = agentplug_dispatch("before_tool_call", {"tool_name": "x"}).outcome
            assert outcome.params == {"limit": 9}
        """
    )
    _run(pytester).assert_outcomes(passed=2)


def test_invalid_config_errors_in_setup_naming_the_key(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.agentplug_config({"runtime": {"default_timeout_ms": -1}})
        def test_bad(agentplug_host):
            pass
        """
    )
    result = _run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*runtime.default_timeout_ms*positive integer*"])


# -- isolation from installed plugins --------------------------------------------------


INSTALLED = """
from agentplug import hookimpl

@hookimpl
def before_tool_call(event):
    return {"block": True, "block_reason": "installed plugin says no"}
"""


def test_no_entry_point_is_loaded_unless_asked(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(fakeplug_installed=INSTALLED)
    _fake_dist(
        pytester, "fakeplug-installed", "agentplug", {"fakeplug-installed": "fakeplug_installed"}
    )
    pytester.syspathinsert()
    pytester.makepyfile(
        test_isolation="""
        import pytest

        def test_isolated(agentplug_host, agentplug_dispatch):
            assert agentplug_host.plugins == []
            outcome = agentplug_dispatch("before_tool_call", {"tool_name": "x"}).outcome
            assert not outcome.blocked

        @pytest.mark.agentplug_entry_points
        def test_all_installed(agentplug_host):
            ids = [p.plugin_id for p in agentplug_host.plugins]
            assert "fakeplug-installed" in ids
            assert all(not p.bundled for p in agentplug_host.plugins)

        @pytest.mark.agentplug_entry_points("fakeplug-installed")
        def test_named(agentplug_host):
            assert [p.plugin_id for p in agentplug_host.plugins] == ["fakeplug-installed"]

        @pytest.mark.agentplug_config({"plugins": {"deny": ["fakeplug-installed"]}})
        @pytest.mark.agentplug_entry_points
        def test_config_filters_apply(agentplug_host):
            assert "fakeplug-installed" not in [p.plugin_id for p in agentplug_host.plugins]

        def test_load_by_name(agentplug_load, agentplug_dispatch):
            record = agentplug_load("fakeplug-installed")
            assert record.distribution == "fakeplug-installed" and not record.bundled
            outcome = agentplug_dispatch("before_tool_call", {"tool_name": "x"}).outcome
            assert outcome.block_reason == "installed plugin says no"

        def test_unknown_name(agentplug_load):
            from agentplug import PluginLoadError
            with pytest.raises(PluginLoadError, match="no installed plugin .*'nope-plugin'"):
                agentplug_load("nope-plugin")
        """
    )
    _run(pytester).assert_outcomes(passed=6)


# -- recorder --------------------------------------------------------------------------


def test_recorder_sees_every_dispatch(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preflight=PREFLIGHT)
    pytester.makepyfile(
        test_recorder="""
        import asyncio
        import pytest
        import preflight

        def test_records(agentplug_host, agentplug_load, agentplug_dispatch, agentplug_recorder):
            agentplug_load(preflight)
            agentplug_dispatch("before_tool_call", {"tool_name": "exec"}, {"run_id": "r1"})
            agentplug_dispatch("before_tool_call", {"tool_name": "boom"})
            agentplug_dispatch("before_message_write", {"message": {"text": "hi"}})
            asyncio.run(agentplug_host.hooks.before_tool_call({"tool_name": "ls"}))
            with pytest.raises(LookupError):
                agentplug_dispatch("befor_tool_call", {})

            assert agentplug_recorder.hooks == [
                "before_tool_call", "before_tool_call", "before_message_write",
                "before_tool_call", "befor_tool_call",
            ]
            calls = agentplug_recorder.calls("before_tool_call")
            assert len(calls) == 3 and agentplug_recorder.count() == 5
            first = calls[0]
            assert first.event == {"tool_name": "exec"} and first.ctx == {"run_id": "r1"}
            assert first.outcome.blocked and first.outcome_data["blocked_by"] == "tool-preflight"
            assert first.statuses == {"tool-preflight": "ok"}
            assert calls[1].handlers[0].status == "error"
            assert calls[1].handlers[0].error == "raised ValueError"
            assert agentplug_recorder.last("before_message_write").via == "call_sync"
            assert agentplug_recorder.last("before_tool_call").event == {"tool_name": "ls"}
            assert isinstance(agentplug_recorder.last().error, LookupError)
            with pytest.raises(LookupError, match="no dispatch of 'agent_end'"):
                agentplug_recorder.last("agent_end")
            agentplug_recorder.clear()
            assert len(agentplug_recorder) == 0

        def test_uninstall_restores_the_instance(agentplug_host):
            from agentplug.testing.pytest_plugin import DispatchRecorder
            before = (agentplug_host.dispatch, agentplug_host.call_sync)
            recorder = DispatchRecorder(agentplug_host)
            recorder.install()
            assert agentplug_host.dispatch != before[0]
            recorder.uninstall()
            assert (agentplug_host.dispatch, agentplug_host.call_sync) == before
        """
    )
    _run(pytester).assert_outcomes(passed=2)


# -- approvals -------------------------------------------------------------------------


def test_scripted_approvals_decide(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preflight=PREFLIGHT)
    pytester.makepyfile(
        test_approvals="""
        import asyncio
        import pytest
        import preflight
        from agentplug.services.approvals import ApprovalBroker

        @pytest.fixture(autouse=True)
        def _load(agentplug_load):
            agentplug_load(preflight)

        def test_per_tool(agentplug_approvals):
            agentplug_approvals.script("web_search", "allow-once")
            check = agentplug_approvals.tool_call_sync("web_search", {"q": "pytest"})
            assert check.outcome.needs_approval and check.allowed
            assert check.verdict.resolution == "allow-once"
            assert check.params == {"q": "pytest"}
            again = agentplug_approvals.tool_call_sync("web_search")
            assert again.allowed  # per-tool decisions are kept
            assert [p.tool_name for p in agentplug_approvals.asked] == ["web_search"] * 2
            assert isinstance(agentplug_approvals.broker, ApprovalBroker)

        def test_in_order(agentplug_approvals):
            agentplug_approvals.script(["deny", "allow-always"])
            assert not agentplug_approvals.tool_call_sync("web_search").allowed
            second = agentplug_approvals.tool_call_sync("web_search")
            assert second.allowed and second.verdict.resolution == "allow-always"

        def test_blocked_and_plain_calls(agentplug_approvals):
            blocked = agentplug_approvals.tool_call_sync("exec")
            assert not blocked.allowed and blocked.verdict.reason == "exec is not allowed"
            assert agentplug_approvals.tool_call_sync("ls").allowed
            assert agentplug_approvals.asked == []

        def test_unscripted_is_denied_with_a_warning(agentplug_approvals):
            with pytest.warns(UserWarning, match="no decision was scripted"):
                check = agentplug_approvals.tool_call_sync("web_search")
            assert not check.allowed and agentplug_approvals.unscripted == ["web_search"]

        def test_with_the_recorder_and_broker(agentplug_dispatch, agentplug_approvals,
                                              agentplug_recorder):
            agentplug_approvals.set_default("deny")
            result = agentplug_dispatch("before_tool_call", {"tool_name": "web_search"})
            verdict = agentplug_approvals.decide_sync("web_search", result)
            assert verdict.resolution == "deny"
            agentplug_approvals.script("web_search", "allow-once")
            check = asyncio.run(agentplug_approvals.tool_call("web_search"))
            assert check.allowed
            assert agentplug_recorder.count("before_tool_call") == 2

        def test_bad_decision(agentplug_approvals):
            with pytest.raises(ValueError, match="unknown approval decision 'yes'"):
                agentplug_approvals.script("web_search", "yes")
        """
    )
    _run(pytester).assert_outcomes(passed=6)


def test_leftover_handler_is_reported_at_teardown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import asyncio
        import pytest

        @pytest.mark.agentplug_config(runtime={"shutdown_timeout_ms": 50})
        def test_slow(agentplug_load, agentplug_dispatch):
            def register(api):
                async def slow(event):
                    await asyncio.sleep(30)
                api.on("before_tool_call", slow, timeout_ms=20)
            agentplug_load(register, "slow")
            result = agentplug_dispatch("before_tool_call", {"tool_name": "x"})
            assert result.handlers[0].status == "timeout"
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*handler slow:before_tool_call was still running*"])


# -- scenario files --------------------------------------------------------------------


PASSING_SCENARIO = """
{
  "description": "web search asks for approval, exec is blocked",
  "plugins": [{"id": "tool-preflight", "module": "preflight"}],
  "approvals": {"web_search": "allow-once"},
  "steps": [
    {"name": "search asks", "hook": "before_tool_call",
     "event": {"tool_name": "web_search", "params": {"q": "x"}},
     "expect": {"blocked": false, "params": {"q": "x"},
                "approval": {"title": "Run web search", "plugin_id": "tool-preflight"}},
     "expect_handlers": {"tool-preflight": "ok"},
     "expect_approval": {"allowed": true, "resolution": "allow-once"}},
    {"hook": "before_tool_call", "event": {"tool_name": "exec"},
     "expect": {"blocked": true, "blockedBy": "tool-preflight", "approval": null},
     "expectApproval": null},
    {"hook": "before_tool_call", "event": {"tool_name": "boom"},
     "expect_handlers": {"tool-preflight": {"status": "error", "error": "raised ValueError"}}}
  ]
}
"""

FAILING_SCENARIO = """
{
  "plugins": [{"id": "tool-preflight", "module": "preflight"}],
  "approvals": {"web_search": "deny"},
  "steps": [
    {"hook": "before_tool_call", "event": {"tool_name": "ls"}, "expect": {"blocked": false}},
    {"name": "exec must be blocked", "hook": "before_tool_call",
     "event": {"tool_name": "exec"},
     "expect": {"blocked": false, "block_reason": "something else"}},
    {"hook": "before_tool_call", "event": {"tool_name": "boom"},
     "expect_handlers": {"tool-preflight": "ok", "audit": "ok"}},
    {"hook": "before_tool_call", "event": {"tool_name": "web_search"},
     "expect_approval": {"allowed": true}}
  ]
}
"""


def test_passing_scenario_file(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preflight=PREFLIGHT)
    pytester.syspathinsert()
    pytester.makefile(".json", scenario_preflight=PASSING_SCENARIO)
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*scenario_preflight.json::scenario PASSED*"])


def test_failing_scenario_file_shows_a_readable_diff(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preflight=PREFLIGHT)
    pytester.syspathinsert()
    pytester.makefile(".json", scenario_broken=FAILING_SCENARIO)
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*scenario_broken.json: 3 of 4 steps did not meet expectations",
            "",
            'step 2 "exec must be blocked" (steps[1]) before_tool_call:',
            "  outcome.blocked",
            "    expected: false",
            "    actual:   true",
            "  outcome.block_reason",
            '    expected: "something else"',
            '    actual:   "exec is not allowed"',
            "  actual outcome: *",
            "  handlers: tool-preflight=ok",
            "",
            "step 3 (steps[2]) before_tool_call:",
            '  handlers["tool-preflight"].status',
            '    expected: "ok"',
            '    actual:   "error"',
            "    (error: raised ValueError)",
            '  handlers["audit"]',
            "    actual:   <missing>",
            "    (no handler of this plugin ran (handlers: tool-preflight=error))",
            "*",
            "step 4 (steps[3]) before_tool_call:",
            "  approval.allowed",
            "    expected: true",
            "    actual:   false",
            "    (reason: 'Run web search' was denied by the approver)",
        ]
    )
    assert "step 1 " not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_scenario_that_cannot_run_names_the_step(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".json",
        scenario_typo="""
        {"steps": [{"hook": "agent_end"},
                   {"hook": "befor_tool_call", "event": {}},
                   {"hook": "before_tool_call", "event": {"params": {}}}]}
        """,
        scenario_missing_plugin='{"plugins": ["no-such-plugin"], "steps": []}',
    )
    result = _run(pytester)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert (
        "step 2 (steps[1]): unknown hook 'befor_tool_call'; did you mean 'before_tool_call'?" in out
    )
    assert "step 3 (steps[2]) (before_tool_call): invalid event: " in out
    assert "ame: Field required" in out  # tool_name (reported by its alias toolName)
    assert (
        "scenario_missing_plugin.json: the scenario's plugins could not be loaded: "
        "plugin 'no-such-plugin': no installed plugin" in out
    )


def test_scenario_crash_names_the_running_step(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(preflight=PREFLIGHT)
    pytester.syspathinsert()
    pytester.makeconftest(
        """
        import importlib

        import pytest


        async def broken(self, tool_name, outcome, **kwargs):
            raise RuntimeError("resolver exploded")


        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(item):
            # What the item runs: the gateway's broker.
            broker = importlib.import_module("agentplug.services.approvals.broker")
            original = broker.ApprovalBroker.decide
            broker.ApprovalBroker.decide = broken
            try:
                return (yield)
            finally:
                broker.ApprovalBroker.decide = original
        """
    )
    pytester.makefile(
        ".json",
        scenario_crash="""
        {"plugins": [{"id": "tool-preflight", "module": "preflight"}],
         "approvals": ["allow-once"],
         "steps": [{"hook": "agent_end"},
                   {"name": "search", "hook": "before_tool_call",
                    "event": {"tool_name": "web_search"}},
                   {"hook": "agent_end"}]}
        """,
    )
    result = _run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "scenario_crash.json: running the scenario failed at step 2 *search* "
            "before_tool_call: RuntimeError: resolver exploded",
            "Traceback (most recent call last):",
        ]
    )


def test_invalid_scenario_file_is_a_collection_error(pytester: pytest.Pytester) -> None:
    pytester.makefile(
        ".json",
        scenario_bad='{"steps": [{"hook": "agent_end", "expect_handlers": "ok", "bogus": 1}]}',
    )
    result = _run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*steps.0.expect_handlers: *", "*steps.0.bogus: Extra inputs are not permitted*"]
    )


def test_scenario_glob_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nagentplug_scenarios = checks/*.json\n")
    checks = pytester.mkdir("checks")
    (checks / "tools.json").write_text('{"steps": [{"hook": "agent_end"}]}', encoding="utf-8")
    pytester.makefile(".json", scenario_default='{"steps": []}')
    result = _run(pytester, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*checks/tools.json::scenario PASSED*"])


# -- opting out ------------------------------------------------------------------------


def test_env_var_disables_scenario_collection(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".json", scenario_a='{"steps": []}')
    pytester.makepyfile(
        "def test_fixture(agentplug_host):\n    assert agentplug_host.plugins == []\n"
    )
    monkeypatch.setenv("AGENTPLUG_PYTEST_DISABLE", "1")
    _run(pytester).assert_outcomes(passed=1)  # the fixtures still work
    monkeypatch.setenv("AGENTPLUG_PYTEST_DISABLE", "0")
    _run(pytester).assert_outcomes(passed=2)


def test_ini_option_disables_scenario_collection(pytester: pytest.Pytester) -> None:
    pytester.makefile(".json", scenario_a='{"steps": []}')
    pytester.makeini("[pytest]\nagentplug_disable = true\n")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_pytest11_entry_point_and_opt_out(pytester: pytest.Pytester) -> None:
    """With the entry point the plugin loads by itself; ``-p no:agentplug`` removes it."""
    if not _entry_point_installed():
        _fake_dist(
            pytester,
            "agentplug-pytest-fake",
            "pytest11",
            {"agentplug": "agentplug.testing.pytest_plugin"},
        )
        pytester.syspathinsert()
    pytester.makefile(".json", scenario_a='{"steps": []}')
    pytester.makepyfile("def test_fixture(agentplug_host):\n    pass\n")
    loaded = pytester.runpytest("-p", "no:cacheprovider")
    loaded.assert_outcomes(passed=2)
    opted_out = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:agentplug")
    opted_out.assert_outcomes(errors=1)
    opted_out.stdout.fnmatch_lines(["*fixture 'agentplug_host' not found*"])


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "--markers")
    result.stdout.fnmatch_lines(
        ["@pytest.mark.agentplug_config(*", "@pytest.mark.agentplug_entry_points(*"]
    )


# -- import cost -----------------------------------------------------------------------


def test_importing_the_plugin_does_not_import_the_runtime() -> None:
    """pytest imports the plugin in every session; the runtime loads with the fixtures."""
    code = textwrap.dedent(
        """
        import sys
        import agentplug
        before = set(sys.modules)
        import agentplug.testing.pytest_plugin
        print(sorted(m for m in set(sys.modules) - before if m.startswith("agentplug")))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['agentplug.testing', 'agentplug.testing.pytest_plugin']"

    probe = (
        "import sys, agentplug.testing.pytest_plugin; print('agentplug.core.host' in sys.modules)"
    )
    eager = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    if eager == "True":
        pytest.xfail(
            "agentplug/__init__.py imports the runtime eagerly, so importing any submodule "
            "(this plugin included) loads agentplug.core.host"
        )


def test_plugin_module_has_no_top_level_runtime_import() -> None:
    import ast

    import agentplug.testing.pytest_plugin as plugin

    tree = ast.parse(Path(plugin.__file__).read_text(encoding="utf-8"))
    runtime = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            runtime += [a.name for a in node.names if a.name.startswith("agentplug")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agentplug"):
            runtime.append(node.module or "")
    assert runtime == []


def test_plugin_config_marker_sets_one_plugins_config(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.agentplug_plugin_config("guard", {"limit": 3})
        def test_it(agentplug_host):
            assert agentplug_host.config.entry("guard").config == {"limit": 3}
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1)


def test_run_fixture_uses_the_tests_event_loop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import asyncio

        def test_it(agentplug_run, agentplug_dispatch):
            async def loop_id():
                return id(asyncio.get_running_loop())

            assert agentplug_run(loop_id()) == agentplug_run(loop_id())
        """
    )
    result = _run(pytester)
    result.assert_outcomes(passed=1)
