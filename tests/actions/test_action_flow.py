"""The action execution flow (ACTIONS.md section 2)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agentplug.actions.flow import (
    ActionMatch,
    DeterministicActionSelector,
    FlowResult,
    MatchTier,
    SimpleActionRuntime,
    StructuredParameterExtractor,
    check_parameters,
    run_action_flow,
)
from agentplug.actions.model import (
    Action,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.actions.registry import ActionRegistry


class Recorder:
    """A handler that records the parameters it was called with."""

    def __init__(self, result: ActionResult | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.result = result or ActionResult(success=True, text="done")

    def __call__(
        self,
        runtime: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        self.calls.append(dict(options.parameters) if options else {})
        return self.result


def action(
    name: str,
    description: str = "Generic test action.",
    *,
    handler: Any = None,
    **kwargs: Any,
) -> Action:
    return Action(name=name, description=description, handler=handler or Recorder(), **kwargs)


def flow(
    registry: ActionRegistry,
    message: Message | str,
    **kwargs: Any,
) -> FlowResult:
    runtime = SimpleActionRuntime(registry)
    return asyncio.run(run_action_flow(runtime, registry, message, **kwargs))


def registry_of(*actions: Action) -> ActionRegistry:
    registry = ActionRegistry()
    for item in actions:
        registry.register(item, "host")
    return registry


def ranked(registry: ActionRegistry, text: str) -> list[str]:
    matches = DeterministicActionSelector().rank(registry.all(), Message(text=text))
    return [m.action.name for m in matches]


# ---------------------------------------------------------------------------
# 1. Intent matching


def test_exact_name_beats_exact_simile() -> None:
    registry = registry_of(
        action("REBOOT_HOST", similes=["RESTART"]),
        action("RESTART"),
    )
    assert ranked(registry, "restart")[0] == "RESTART"


def test_exact_simile_beats_name_substring() -> None:
    registry = registry_of(
        action("STATUS_REPORT"),
        action("HEALTH", similes=["STATUS"]),
    )
    assert ranked(registry, "status")[:1] == ["HEALTH"]


def test_name_substring_beats_description_keywords() -> None:
    registry = registry_of(
        action("FORECAST_TOOL", "Weather forecast for the weekend trip"),
        action("CHECK_WEATHER", "Unrelated words only"),
    )
    assert ranked(registry, "please check weather for the weekend trip") == [
        "CHECK_WEATHER",
        "FORECAST_TOOL",
    ]


def test_names_compare_case_insensitively_ignoring_underscores() -> None:
    registry = registry_of(action("RESTART_AGENT"))
    for text in ("restart_agent", "Restart Agent", "RESTARTAGENT", "restart-agent"):
        matches = DeterministicActionSelector().rank(registry.all(), Message(text=text))
        assert matches[0].tier is MatchTier.EXACT_NAME, text


def test_first_word_is_an_exact_command() -> None:
    registry = registry_of(action("CHECK_WEATHER"), action("CITY_INFO"))
    matches = DeterministicActionSelector().rank(
        registry.all(), Message(text="CHECK_WEATHER city=Paris")
    )
    assert matches[0].action.name == "CHECK_WEATHER"
    assert matches[0].tier is MatchTier.EXACT_NAME


def test_structured_content_action_is_an_exact_command() -> None:
    registry = registry_of(action("SEND_MAIL"), action("HELP"))
    message = Message(text="help me send this", content={"action": "send_mail"})
    matches = DeterministicActionSelector().rank(registry.all(), message)
    assert [m.action.name for m in matches][:1] == ["SEND_MAIL"]


def test_substring_matches_whole_words_only() -> None:
    registry = registry_of(action("AGE", "Compute a person's age."))
    assert ranked(registry, "send a message now") == []


def test_longer_substring_wins_a_substring_tie() -> None:
    registry = registry_of(
        action("WEATHER", "Something."),
        action("WEATHER_ALERT", "Something else."),
    )
    assert ranked(registry, "any weather alert today?") == ["WEATHER_ALERT", "WEATHER"]


def test_more_shared_keywords_win_a_keyword_tie() -> None:
    registry = registry_of(
        action("ONE", "Translate documents."),
        action("TWO", "Translate legal documents into French."),
    )
    assert ranked(registry, "translate these legal documents") == ["TWO", "ONE"]


def test_remaining_ties_go_to_the_action_registered_first() -> None:
    registry = registry_of(
        action("FIRST", "Book a table."),
        action("SECOND", "Book a flight."),
    )
    assert ranked(registry, "book something") == ["FIRST", "SECOND"]


def test_stopwords_alone_do_not_match() -> None:
    registry = registry_of(action("THING", "What is this for and why would you want it"))
    assert ranked(registry, "what would you want") == []


def test_no_match_runs_nothing_and_delivers_nothing() -> None:
    recorder = Recorder()
    delivered: list[ActionResult] = []
    registry = registry_of(action("CHECK_WEATHER", handler=recorder))
    result = flow(registry, "hello there", deliver=delivered.append)
    assert result.outcome == "no_match"
    assert result.result is None
    assert recorder.calls == [] and delivered == []


def test_custom_selector_replaces_the_default() -> None:
    class PickLast:
        async def select(
            self, actions: Sequence[Action], message: Message, state: State | None
        ) -> list[ActionMatch]:
            return [ActionMatch(actions[-1], MatchTier.KEYWORD, "llm said so")]

    registry = registry_of(action("FIRST_ONE"), action("LAST_ONE"))
    result = flow(registry, "FIRST_ONE", selector=PickLast())
    assert result.action is not None and result.action.name == "LAST_ONE"


def test_selector_error_is_reported_not_raised() -> None:
    class Broken:
        async def select(
            self, actions: Sequence[Action], message: Message, state: State | None
        ) -> list[ActionMatch]:
            raise RuntimeError("model offline")

    result = flow(registry_of(action("ANY")), "ANY", selector=Broken())
    assert result.outcome == "error"
    step = result.trace.step("select")
    assert step is not None and "model offline" in step.detail


# ---------------------------------------------------------------------------
# 2. Validation


def test_validate_false_skips_the_action_and_tries_the_next_candidate() -> None:
    first, second = Recorder(), Recorder()
    registry = registry_of(
        action("DEPLOY", handler=first, validate=lambda rt, m, s: False),
        action("DEPLOY_STAGING", "Deploy the build to staging.", handler=second),
    )
    result = flow(registry, "deploy to staging")
    assert result.action is not None and result.action.name == "DEPLOY_STAGING"
    assert first.calls == [] and len(second.calls) == 1
    statuses = [(s.name, s.status, s.action) for s in result.trace.steps if s.name == "validate"]
    assert statuses == [("validate", "skipped", "DEPLOY"), ("validate", "ok", "DEPLOY_STAGING")]


def test_async_validate_is_awaited() -> None:
    async def only_admin(runtime: ActionRuntime, message: Message, state: State | None) -> bool:
        await asyncio.sleep(0)
        return message.entity_id == "admin"

    recorder = Recorder()
    registry = registry_of(action("RESTART_AGENT", handler=recorder, validate=only_admin))
    assert flow(registry, Message(text="RESTART_AGENT", entity_id="guest")).outcome == "not_valid"
    assert flow(registry, Message(text="RESTART_AGENT", entity_id="admin")).outcome == "success"
    assert len(recorder.calls) == 1


def test_validate_that_raises_counts_as_not_valid() -> None:
    def broken(runtime: ActionRuntime, message: Message, state: State | None) -> bool:
        raise KeyError("role")

    recorder = Recorder()
    result = flow(registry_of(action("ADMIN", handler=recorder, validate=broken)), "ADMIN")
    assert result.outcome == "not_valid"
    assert recorder.calls == []
    step = result.trace.step("validate")
    assert step is not None and step.status == "error" and "role" in step.detail


def test_validate_can_ask_the_runtime_for_a_service() -> None:
    def needs_mail(runtime: ActionRuntime, message: Message, state: State | None) -> bool:
        return runtime.get_service("mail") is not None

    registry = registry_of(action("SEND_MAIL", validate=needs_mail))
    without = asyncio.run(run_action_flow(SimpleActionRuntime(registry), registry, "SEND_MAIL"))
    with_mail = asyncio.run(
        run_action_flow(SimpleActionRuntime(registry, {"mail": object()}), registry, "SEND_MAIL")
    )
    assert (without.outcome, with_mail.outcome) == ("not_valid", "success")


# ---------------------------------------------------------------------------
# 3. Parameter extraction and schema validation


def _extract(params: list[ActionParameter], message: Message) -> dict[str, Any]:
    return StructuredParameterExtractor().extract_sync(action("X_X", parameters=params), message)


def test_extractor_reads_key_value_pairs_with_quoted_values() -> None:
    params = [ActionParameter(name=n) for n in ("city", "note", "unit")]
    text = """CHECK_WEATHER city="New York" note='it\\'s cold' unit=C"""
    assert _extract(params, Message(text=text)) == {
        "city": "New York",
        "note": "it's cold",
        "unit": "C",
    }


def test_extractor_reads_a_json_object_in_the_text() -> None:
    params = [ActionParameter(name="city"), ActionParameter(name="days")]
    text = 'forecast {"city": "Paris", "days": 3} please'
    assert _extract(params, Message(text=text)) == {"city": "Paris", "days": 3}


def test_extractor_reads_structured_content() -> None:
    params = [ActionParameter(name="city")]
    message = Message(text="weather", content={"parameters": {"city": "Oslo"}})
    assert _extract(params, message) == {"city": "Oslo"}


def test_extractor_prefers_content_then_json_then_key_value() -> None:
    params = [ActionParameter(name=n) for n in ("a", "b", "c")]
    message = Message(
        text='{"a": "json", "b": "json"} a=kv b=kv c=kv', content={"params": {"a": "content"}}
    )
    assert _extract(params, message) == {"a": "content", "b": "json", "c": "kv"}


def test_extractor_returns_only_declared_parameters() -> None:
    params = [ActionParameter(name="city")]
    assert _extract(params, Message(text="city=Rome admin=true")) == {"city": "Rome"}


def test_required_parameter_missing_fails_naming_it_without_calling_the_handler() -> None:
    recorder = Recorder()
    registry = registry_of(
        action(
            "CHECK_WEATHER",
            handler=recorder,
            parameters=[ActionParameter(name="city", description="City name", required=True)],
        )
    )
    result = flow(registry, "CHECK_WEATHER")
    assert result.outcome == "failed"
    assert result.result is not None and not result.result.success
    assert result.result.text.startswith("Missing required parameter: city (City name)")
    assert result.result.data == {
        "action": "CHECK_WEATHER",
        "parameter": "city",
        "reason": "missing",
    }
    assert recorder.calls == []


def test_strings_are_coerced_to_integer_number_and_boolean() -> None:
    recorder = Recorder()
    registry = registry_of(
        action(
            "CONFIGURE",
            handler=recorder,
            parameters=[
                ActionParameter(name="count", schema={"type": "integer"}),
                ActionParameter(name="ratio", schema={"type": "number"}),
                ActionParameter(name="dry", schema={"type": "boolean"}),
                ActionParameter(name="tags", schema={"type": "array"}),
            ],
        )
    )
    flow(registry, 'CONFIGURE count=3 ratio=0.5 dry=yes tags=["a","b"]')
    assert recorder.calls == [{"count": 3, "ratio": 0.5, "dry": True, "tags": ["a", "b"]}]


def test_value_of_the_wrong_type_fails_naming_the_parameter() -> None:
    recorder = Recorder()
    registry = registry_of(
        action(
            "CONFIGURE",
            handler=recorder,
            parameters=[ActionParameter(name="count", schema={"type": "integer"})],
        )
    )
    result = flow(registry, "CONFIGURE count=lots")
    assert result.result is not None
    assert result.result.text == (
        "Invalid parameter count for action CONFIGURE: expected an integer "
        "(a whole number such as 3), got 'lots'."
    )
    assert recorder.calls == []


def test_enum_restricts_values() -> None:
    level = action(
        "LOG_LEVEL",
        parameters=[
            ActionParameter(name="level", schema={"type": "string", "enum": ["debug", "info"]})
        ],
    )
    assert check_parameters(level, {"level": "info"}) == {"level": "info"}
    with pytest.raises(ValueError, match="'loud' is not one of the allowed values"):
        check_parameters(level, {"level": "loud"})


def test_pattern_must_match() -> None:
    target = action(
        "PING", parameters=[ActionParameter(name="host", schema={"pattern": r"^[a-z.]+$"})]
    )
    assert check_parameters(target, {"host": "example.org"}) == {"host": "example.org"}
    with pytest.raises(ValueError, match="does not match the pattern"):
        check_parameters(target, {"host": "bad host!"})


def test_minimum_and_maximum_are_inclusive_bounds() -> None:
    target = action(
        "SET_VOLUME",
        parameters=[
            ActionParameter(name="v", schema={"type": "integer", "minimum": 0, "maximum": 10})
        ],
    )
    assert check_parameters(target, {"v": "0"}) == {"v": 0}
    assert check_parameters(target, {"v": "10"}) == {"v": 10}
    with pytest.raises(ValueError, match="above the maximum 10"):
        check_parameters(target, {"v": "11"})
    with pytest.raises(ValueError, match="below the minimum 0"):
        check_parameters(target, {"v": -1})


def test_default_fills_a_missing_value() -> None:
    target = action(
        "LIST_ITEMS",
        parameters=[
            ActionParameter(name="limit", required=True, schema={"type": "integer", "default": 20})
        ],
    )
    assert check_parameters(target, {}) == {"limit": 20}


def test_optional_parameter_without_value_is_left_out() -> None:
    target = action("LIST_ITEMS", parameters=[ActionParameter(name="filter")])
    assert check_parameters(target, {"other": "x"}) == {}


def test_boolean_parameter_rejects_unclear_words() -> None:
    target = action("X_X", parameters=[ActionParameter(name="f", schema={"type": "boolean"})])
    with pytest.raises(ValueError, match="expected a boolean"):
        check_parameters(target, {"f": "maybe"})


def test_custom_extractor_replaces_the_default() -> None:
    class Fixed:
        async def extract(
            self, action: Action, message: Message, state: State | None
        ) -> Mapping[str, Any]:
            return {"city": "Lima"}

    recorder = Recorder()
    registry = registry_of(
        action("CHECK_WEATHER", handler=recorder, parameters=[ActionParameter(name="city")])
    )
    flow(registry, "CHECK_WEATHER city=Quito", extractor=Fixed())
    assert recorder.calls == [{"city": "Lima"}]


# ---------------------------------------------------------------------------
# 4. Handler execution


def test_async_handler_is_awaited() -> None:
    async def handler(
        runtime: ActionRuntime, message: Message, state: State | None, options: Any
    ) -> ActionResult:
        await asyncio.sleep(0)
        return ActionResult(success=True, text="async done", data={"n": 1})

    result = flow(registry_of(action("ASYNC_ONE", handler=handler)), "ASYNC_ONE")
    assert result.result == ActionResult(success=True, text="async done", data={"n": 1})
    assert result.ok


def test_handler_exception_becomes_action_failed_result() -> None:
    def handler(runtime: ActionRuntime, message: Message, state: State | None, options: Any) -> Any:
        raise ConnectionError("service unreachable")

    result = flow(registry_of(action("FLAKY", handler=handler)), "FLAKY")
    assert result.outcome == "failed"
    assert result.result is not None
    assert result.result.success is False
    assert result.result.text == "Action failed: service unreachable"


def test_handler_result_without_success_is_a_failure() -> None:
    def handler(runtime: ActionRuntime, message: Message, state: State | None, options: Any) -> Any:
        return {"text": "forgot the flag"}

    result = flow(registry_of(action("SLOPPY", handler=handler)), "SLOPPY")
    assert result.result is not None and not result.result.success
    assert "without 'success'" in result.result.text


def test_handler_may_return_a_mapping_with_success() -> None:
    def handler(runtime: ActionRuntime, message: Message, state: State | None, options: Any) -> Any:
        return {"success": True, "text": "mapped"}

    result = flow(registry_of(action("MAPPED", handler=handler)), "MAPPED")
    assert result.result == ActionResult(success=True, text="mapped")


def test_handler_can_register_an_action_live_through_the_runtime() -> None:
    def handler(
        runtime: ActionRuntime, message: Message, state: State | None, options: Any
    ) -> ActionResult:
        runtime.register_action(action("LEARNED"))
        return ActionResult(success=True, text="learned")

    registry = registry_of(action("LEARN", handler=handler))
    flow(registry, "LEARN")
    assert registry.owner_of("LEARNED") == "host"
    assert flow(registry, "LEARNED").outcome == "success"


# ---------------------------------------------------------------------------
# 5. Delivery and trace


def test_result_is_delivered_through_the_callback() -> None:
    delivered: list[ActionResult] = []

    async def deliver(result: ActionResult) -> None:
        delivered.append(result)

    result = flow(registry_of(action("GREET")), "GREET", deliver=deliver)
    assert result.delivered
    assert delivered == [ActionResult(success=True, text="done")]


def test_parameter_failure_is_delivered_so_the_user_can_fix_it() -> None:
    delivered: list[ActionResult] = []
    registry = registry_of(
        action("ECHO_BACK", parameters=[ActionParameter(name="text", required=True)])
    )
    flow(registry, "ECHO_BACK", deliver=delivered.append)
    assert [r.text.split(" (")[0].split(".")[0] for r in delivered] == [
        "Missing required parameter: text"
    ]


def test_delivery_error_is_recorded_and_the_result_still_returned() -> None:
    def deliver(result: ActionResult) -> None:
        raise OSError("socket closed")

    result = flow(registry_of(action("GREET")), "GREET", deliver=deliver)
    assert result.result is not None and result.result.success
    assert not result.delivered
    step = result.trace.step("deliver")
    assert step is not None and step.status == "error" and "socket closed" in step.detail


def test_trace_records_every_step_in_order() -> None:
    registry = registry_of(
        action("CHECK_WEATHER", parameters=[ActionParameter(name="city", required=True)])
    )
    result = flow(registry, "CHECK_WEATHER city=Paris", deliver=lambda r: None)
    assert [(s.name, s.status) for s in result.trace.steps] == [
        ("select", "ok"),
        ("validate", "ok"),
        ("extract", "ok"),
        ("check_parameters", "ok"),
        ("execute", "ok"),
        ("deliver", "ok"),
    ]
    assert all(s.duration_ms >= 0 for s in result.trace.steps)


def test_steps_are_logged_as_single_line_json_without_parameter_values(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = registry_of(
        action("LOGIN", parameters=[ActionParameter(name="token", required=True)])
    )
    with caplog.at_level(logging.INFO, logger="agentplug.actions"):
        result = flow(registry, 'LOGIN token="s3cr3t\nvalue"')
    records = [r for r in caplog.records if r.name == "agentplug.actions"]
    assert len(records) == len(result.trace.steps)
    for record in records:
        line = record.getMessage()
        assert "\n" not in line
        payload = json.loads(line)
        assert payload["event"] == "action_step"
        assert payload["flow_id"] == result.trace.flow_id
        assert set(payload) >= {"name", "status", "detail", "duration_ms"}
    assert "s3cr3t" not in caplog.text
