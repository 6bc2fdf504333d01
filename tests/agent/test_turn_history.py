"""The session's messages as a turn's hooks receive them: one frozen copy a turn."""

from __future__ import annotations

from agentplug_hookspecs import FrozenDict

from tests.agent.conftest import Recorder, make_runner, run

HOOKS = ("agent_turn_prepare", "before_prompt_build", "before_agent_reply", "agent_end")


def test_the_hooks_of_one_turn_share_one_frozen_copy_of_each_message() -> None:
    recorder = Recorder(HOOKS)
    runner, _ = make_runner(["Hi.", "Again."], recorder=recorder)
    run(runner.run_turn("hello", session_key="s1"))
    recorder.calls.clear()
    run(runner.run_turn("hello again", session_key="s1"))
    firsts = [event.messages[0] for event in (c[1] for c in recorder.calls)]
    assert len(firsts) == len(HOOKS)
    assert type(firsts[0]) is FrozenDict and firsts[0]["content"] == "hello"
    assert all(first is firsts[0] for first in firsts)


def test_a_later_hook_of_the_turn_sees_the_messages_written_since() -> None:
    recorder = Recorder(("before_prompt_build", "agent_end"))
    runner, _ = make_runner(["Hi."], recorder=recorder)
    run(runner.run_turn("hello", session_key="s1"))
    built, ended = recorder.events("before_prompt_build")[0], recorder.events("agent_end")[0]
    assert [m["content"] for m in built.messages] == []
    assert [m["content"] for m in ended.messages] == ["hello", "Hi."]
