"""Discovery of installed plugins (entry-point group ``agentplug``) and its cache."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from agentplug import PluginHost
from agentplug.core.loader import DiscoveredPlugin, discover, environment_fingerprint

FakeDist = Callable[..., Path]

# Only the fake distributions of these tests load: the environment may hold real plugins.
ONLY_FAKES = {
    "plugins": {
        "allow": [
            "fakeplug-good",
            "fakeplug-broken",
            "fakeplug-sig",
            "fakeplug-typo",
            "fakeplug-pinger",
        ]
    }
}


def _fakes(found: list[DiscoveredPlugin]) -> list[str]:
    return [p.name for p in found if p.name.startswith("fakeplug-")]


GOOD = """
from agentplug import hookimpl

@hookimpl(priority=5)
def before_tool_call(event):
    return {"block": True, "block_reason": "good plugin says no"}
"""


def test_installed_plugin_is_discovered_through_its_entry_point(fake_dist: FakeDist) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    host = PluginHost(ONLY_FAKES)
    loaded = host.load_installed()
    assert [r.plugin_id for r in loaded] == ["fakeplug-good"]
    assert loaded[0].bundled is False
    assert loaded[0].distribution == "fakeplug-good"
    result = asyncio.run(host.dispatch("before_tool_call", {"tool_name": "x"}))
    assert result.outcome.blocked_by == "fakeplug-good"


def test_import_error_is_isolated_and_names_the_plugin(fake_dist: FakeDist) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    fake_dist("fakeplug-broken", "fakeplug_broken", "import does_not_exist_anywhere\n")
    host = PluginHost(ONLY_FAKES)
    loaded = host.load_installed()
    assert [r.plugin_id for r in loaded] == ["fakeplug-good"]
    assert [e.plugin_id for e in host.load_errors] == ["fakeplug-broken"]
    assert "does_not_exist_anywhere" in host.load_errors[0].cause


def test_bad_signature_is_isolated_and_names_the_plugin(fake_dist: FakeDist) -> None:
    fake_dist(
        "fakeplug-sig",
        "fakeplug_sig",
        """
        from agentplug import hookimpl

        @hookimpl
        def before_tool_call(event, ctx, surprise):
            return None
        """,
    )
    host = PluginHost(ONLY_FAKES)
    assert host.load_installed() == []
    (error,) = host.load_errors
    assert error.plugin_id == "fakeplug-sig"
    assert "surprise" in error.cause


def test_unknown_hook_is_isolated_with_a_suggestion(fake_dist: FakeDist) -> None:
    fake_dist(
        "fakeplug-typo",
        "fakeplug_typo",
        """
        from agentplug import hookimpl

        @hookimpl
        def before_tool_cal(event):
            return None
        """,
    )
    host = PluginHost(ONLY_FAKES)
    host.load_installed()
    (error,) = host.load_errors
    assert error.plugin_id == "fakeplug-typo"
    assert "before_tool_cal" in error.cause and "did you mean 'before_tool_call'" in error.cause


def test_denied_plugin_is_never_imported(fake_dist: FakeDist, tmp_path: Path) -> None:
    canary = tmp_path / "imported"
    fake_dist("fakeplug-denied", "fakeplug_denied", f"open({str(canary)!r}, 'w').close()\n")
    host = PluginHost({"plugins": {"deny": ["fakeplug-denied"]}})
    host.load_installed()
    assert not canary.exists()


def test_disabled_entry_is_never_imported(fake_dist: FakeDist, tmp_path: Path) -> None:
    canary = tmp_path / "imported"
    fake_dist("fakeplug-off", "fakeplug_off", f"open({str(canary)!r}, 'w').close()\n")
    host = PluginHost({"plugins": {"entries": {"fakeplug-off": {"enabled": False}}}})
    host.load_installed()
    assert not canary.exists()


def test_allow_list_limits_loading(fake_dist: FakeDist) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    fake_dist("fakeplug-other", "fakeplug_other", GOOD)
    host = PluginHost({"plugins": {"allow": ["fakeplug-other"]}})
    assert [r.plugin_id for r in host.load_installed()] == ["fakeplug-other"]


def test_plugins_disabled_globally_load_nothing(fake_dist: FakeDist) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    host = PluginHost({"plugins": {"enabled": False}})
    assert host.load_installed() == []


def test_warm_cache_returns_the_fresh_scan(fake_dist: FakeDist, tmp_path: Path) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    fresh = discover("agentplug", use_cache=False)
    first = discover("agentplug", cache_dir=tmp_path / "c")
    warm = discover("agentplug", cache_dir=tmp_path / "c")
    assert fresh == first == warm
    assert list((tmp_path / "c").glob("entry-points-*.json"))


def test_installing_a_distribution_invalidates_the_cache(
    fake_dist: FakeDist, site_dir: Path, tmp_path: Path
) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    before = environment_fingerprint()
    assert _fakes(discover("agentplug", cache_dir=tmp_path / "c")) == ["fakeplug-good"]
    fake_dist("fakeplug-late", "fakeplug_late", GOOD)
    assert environment_fingerprint() != before
    names = _fakes(discover("agentplug", cache_dir=tmp_path / "c"))
    assert names == ["fakeplug-good", "fakeplug-late"]


def test_corrupt_cache_file_falls_back_to_a_scan(fake_dist: FakeDist, tmp_path: Path) -> None:
    fake_dist("fakeplug-good", "fakeplug_good", GOOD)
    cache = tmp_path / "c"
    discover("agentplug", cache_dir=cache)
    for file in cache.glob("entry-points-*.json"):
        file.write_text("{not json", encoding="utf-8")
    assert _fakes(discover("agentplug", cache_dir=cache)) == ["fakeplug-good"]


def test_third_party_hookspecs_load_from_their_entry_point(fake_dist: FakeDist) -> None:
    fake_dist(
        "fakeplug-specs",
        "fakeplug_specs",
        '''
        from agentplug_hookspecs import Context, Event, HookKind, Observe, declare
        from agentplug_hookspecs.common import ObserveOutcome

        class PingEvent(Event):
            text: str = ""

        @declare(kind=HookKind.OBSERVE, event=PingEvent, ctx=Context, result=None,
                 outcome=ObserveOutcome, reduction=Observe(), group="Extensions")
        def on_ping(event, ctx):
            """Observe a ping (an extension hook)."""
        ''',
        entry_points={"fakeplug-specs": "fakeplug_specs"},
        group="agentplug.hookspecs",
    )
    fake_dist(
        "fakeplug-pinger",
        "fakeplug_pinger",
        """
        from agentplug import hookimpl
        seen = []

        @hookimpl
        def on_ping(event):
            seen.append(event.text)
        """,
    )
    host = PluginHost(ONLY_FAKES)
    host.load_installed()
    assert "on_ping" in host.declarations
    asyncio.run(host.dispatch("on_ping", {"text": "hello"}))
    import fakeplug_pinger  # type: ignore[import-not-found]

    assert fakeplug_pinger.seen == ["hello"]


def test_display_name_and_description_come_from_the_plugin_object() -> None:
    class Named:
        name = "Weather helper"
        description = "Looks the weather up."

        def register(self, api: object) -> None:
            pass

    host = PluginHost()
    record = host.register(Named(), "weather")
    assert (record.plugin_id, record.name, record.description) == (
        "weather",
        "Weather helper",
        "Looks the weather up.",
    )
    bare = host.register(lambda api: None, "bare")
    assert (bare.name, bare.description) == (None, None)  # shown by id


def test_an_installed_plugins_description_defaults_to_its_distribution_summary(
    site_dir: Path,
) -> None:
    (site_dir / "fakeplug_summary.py").write_text("def register(api):\n    pass\n")
    info = site_dir / "fakeplug_summary-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: fakeplug-summary\nVersion: 1.0\n"
        "Summary: Counts words in replies.\n"
    )
    (info / "entry_points.txt").write_text("[agentplug]\nfakeplug-summary = fakeplug_summary\n")
    host = PluginHost({"plugins": {"allow": ["fakeplug-summary"]}})
    [record] = host.load_installed(use_cache=False)
    assert record.plugin_id == "fakeplug-summary" and record.name is None
    assert record.description == "Counts words in replies."


def test_hook_allowed_tells_a_plugin_whether_the_gates_let_it_run_a_hook() -> None:
    seen: dict[str, bool] = {}

    def register(api: object) -> None:
        for hook in ("agent_end", "message_received", "no_such_hook"):
            seen[hook] = api.hook_allowed(hook)  # type: ignore[attr-defined]

    PluginHost().register(register, "p", bundled=False)
    assert seen == {"agent_end": False, "message_received": True, "no_such_hook": False}
    seen.clear()
    allowed = {"plugins": {"entries": {"p": {"hooks": {"allow_conversation_access": True}}}}}
    PluginHost(allowed).register(register, "p", bundled=False)
    assert seen["agent_end"] is True
