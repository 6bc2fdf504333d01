"""The Action model (ACTIONS.md section 1 and 5) and the action registry."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pluggy
import pytest
from agentplug.actions.model import (
    Action,
    ActionDefinitionError,
    ActionNamingWarning,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.actions.registry import (
    ActionConflictError,
    ActionRegistrationError,
    ActionRegistry,
)
from pydantic import ValidationError


def _ok(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    return ActionResult(success=True, text="done")


def make_action(name: str = "DO_THING", **kwargs: Any) -> Action:
    kwargs.setdefault("description", "Does the thing when asked to do the thing.")
    return Action(name=name, handler=_ok, **kwargs)


# ---------------------------------------------------------------------------
# Action


def test_empty_description_is_an_error_naming_the_action() -> None:
    with pytest.raises(ActionDefinitionError, match="'DO_THING' has an empty description"):
        make_action(description="   ")


def test_empty_name_is_an_error() -> None:
    with pytest.raises(ActionDefinitionError, match="non-empty name"):
        make_action(name="")


def test_name_not_in_screaming_snake_case_warns_naming_the_action(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="agentplug.actions"),
        pytest.warns(ActionNamingWarning, match="'restartAgent'.*'RESTART_AGENT'"),
    ):
        make_action(name="restartAgent")
    assert "restartAgent" in caplog.text


def test_screaming_snake_case_name_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_action(name="RESTART_AGENT2")


def test_handler_must_be_callable() -> None:
    with pytest.raises(ActionDefinitionError, match="handler must be callable"):
        Action(name="X_Y", description="d", handler="nope")  # type: ignore[arg-type]


def test_validate_defaults_to_always_true() -> None:
    action = make_action()
    assert action.validate(None, Message(text="hi"), None) is True  # type: ignore[arg-type]


def test_duplicate_parameter_names_are_rejected() -> None:
    with pytest.raises(ActionDefinitionError, match="parameter 'city' twice"):
        make_action(parameters=[ActionParameter(name="city"), ActionParameter(name="city")])


def test_parameters_given_as_mappings_are_validated_into_models() -> None:
    action = make_action(parameters=[{"name": "count", "schema": {"type": "integer"}}])
    param = action.parameter("count")
    assert param is not None
    assert param.schema_.type == "integer"


def test_action_is_immutable_once_built() -> None:
    action = make_action(similes=["A_B"])
    assert action.similes == ("A_B",)
    with pytest.raises(AttributeError):
        action.name = "OTHER"  # type: ignore[misc]


def test_describe_is_json_ready_with_schema_key() -> None:
    action = make_action(
        similes=["THING"],
        parameters=[ActionParameter(name="n", required=True, schema={"type": "integer"})],
    )
    assert action.describe() == {
        "name": "DO_THING",
        "similes": ["THING"],
        "description": "Does the thing when asked to do the thing.",
        "parameters": [
            {"name": "n", "description": "", "required": True, "schema": {"type": "integer"}}
        ],
    }


# ---------------------------------------------------------------------------
# Parameters and payloads


def test_parameter_schema_accepts_the_json_schema_keywords() -> None:
    param = ActionParameter.model_validate(
        {
            "name": "level",
            "description": "log level",
            "required": True,
            "schema": {
                "type": "string",
                "enum": ["debug", "info"],
                "default": "info",
                "pattern": "^[a-z]+$",
            },
        }
    )
    assert param.schema_.enum == ["debug", "info"]
    assert param.schema_.default == "info"
    assert param.model_dump(exclude_none=True)["schema"]["pattern"] == "^[a-z]+$"


def test_invalid_pattern_is_rejected_when_defined() -> None:
    with pytest.raises(ValidationError, match="not a valid regular expression"):
        ActionParameter(name="p", schema={"type": "string", "pattern": "("})


def test_minimum_above_maximum_is_rejected() -> None:
    with pytest.raises(ValidationError, match="greater than maximum"):
        ActionParameter(name="p", schema={"type": "number", "minimum": 5, "maximum": 1})


def test_unknown_parameter_type_is_rejected() -> None:
    with pytest.raises(ValidationError):
        ActionParameter(name="p", schema={"type": "date"})


def test_parameter_name_must_be_plain() -> None:
    with pytest.raises(ValidationError, match="must start with a letter"):
        ActionParameter(name="bad name")


def test_every_result_includes_success() -> None:
    with pytest.raises(ValidationError, match="success"):
        ActionResult.model_validate({"text": "no success flag"})


def test_result_crosses_json_with_camel_case_aliases() -> None:
    result = ActionResult.model_validate(
        {
            "success": True,
            "text": "here",
            "attachments": [{"url": "https://x/y.png", "contentType": "image/png"}],
        }
    )
    assert result.attachments is not None
    assert result.attachments[0].content_type == "image/png"
    assert result.model_dump(exclude_none=True)["attachments"][0]["contentType"] == "image/png"


def test_message_accepts_camel_case_and_structured_content() -> None:
    message = Message.model_validate(
        {"text": "hi", "entityId": "user-1", "content": {"action": "X"}}
    )
    assert message.entity_id == "user-1"
    assert message.content == {"action": "X"}


# ---------------------------------------------------------------------------
# Registry


def test_register_then_get_by_name() -> None:
    registry = ActionRegistry()
    action = make_action()
    registry.register(action, "host")
    assert registry.get("DO_THING") is action
    assert registry.owner_of("DO_THING") == "host"
    assert "DO_THING" in registry


def test_get_ignores_case_and_underscores() -> None:
    registry = ActionRegistry()
    action = registry.register(make_action(), "host")
    assert registry.get("do_thing") is action
    assert registry.get("DoThing") is action


def test_clash_names_both_owners_the_action_and_what_to_do() -> None:
    registry = ActionRegistry()
    registry.register(make_action("RESTART_AGENT"), "plugin-a")
    with pytest.raises(ActionConflictError) as info:
        registry.register(make_action("RESTART_AGENT"), "plugin-b")
    text = str(info.value)
    assert "'RESTART_AGENT'" in text
    assert "'plugin-a'" in text and "'plugin-b'" in text
    assert "Rename one of them" in text
    assert (info.value.existing_owner, info.value.new_owner) == ("plugin-a", "plugin-b")


def test_names_differing_only_in_case_or_underscores_clash() -> None:
    registry = ActionRegistry()
    registry.register(make_action("RESTART_AGENT"), "host")
    with (
        pytest.raises(ActionConflictError, match="as 'RESTART_AGENT'"),
        pytest.warns(ActionNamingWarning),
    ):
        registry.register(make_action("restartAgent"), "plugin-x")


def test_iteration_follows_registration_order() -> None:
    registry = ActionRegistry()
    for name in ("ZETA", "ALPHA", "MIDDLE"):
        registry.register(make_action(name), "host")
    assert registry.names() == ["ZETA", "ALPHA", "MIDDLE"]
    assert [a.name for a in registry] == ["ZETA", "ALPHA", "MIDDLE"]
    assert [a.name for a in registry.all()] == ["ZETA", "ALPHA", "MIDDLE"]
    assert len(registry) == 3


def test_unregister_removes_and_returns_the_action() -> None:
    registry = ActionRegistry()
    action = registry.register(make_action(), "host")
    assert registry.unregister("do_thing") is action
    assert registry.get("DO_THING") is None
    registry.register(make_action(), "plugin-b")  # the name is free again
    assert registry.owner_of("DO_THING") == "plugin-b"


def test_unregister_unknown_name_returns_none() -> None:
    assert ActionRegistry().unregister("NOPE") is None


def test_unregister_owner_removes_only_that_owners_actions() -> None:
    registry = ActionRegistry()
    registry.add_plugin_actions("plugin-a", [make_action("A_ONE"), make_action("A_TWO")])
    registry.register(make_action("HOST_ONE"), "host")
    removed = registry.unregister_owner("plugin-a")
    assert [a.name for a in removed] == ["A_ONE", "A_TWO"]
    assert registry.names() == ["HOST_ONE"]


def test_plugin_item_that_is_not_an_action_is_rejected_naming_the_plugin() -> None:
    registry = ActionRegistry()
    with pytest.raises(ActionRegistrationError, match=r"plugin 'weather'.*item #1 is 'dict'"):
        registry.add_plugin_actions("weather", [make_action(), {"name": "FAKE"}])  # type: ignore[list-item]


def test_plugin_returning_a_single_action_instead_of_a_list_is_rejected() -> None:
    registry = ActionRegistry()
    with pytest.raises(ActionRegistrationError, match=r"plugin 'weather'.*list of"):
        registry.add_plugin_actions("weather", make_action())  # type: ignore[arg-type]


def test_plugin_contribution_is_all_or_nothing() -> None:
    registry = ActionRegistry()
    registry.register(make_action("TAKEN"), "host")
    with pytest.raises(ActionConflictError, match="'TAKEN'"):
        registry.add_plugin_actions("late", [make_action("FRESH"), make_action("TAKEN")])
    assert registry.names() == ["TAKEN"]


def test_clash_inside_one_plugin_batch_is_reported() -> None:
    registry = ActionRegistry()
    with pytest.raises(ActionConflictError, match="'dup-plugin'"):
        registry.add_plugin_actions("dup-plugin", [make_action("SAME"), make_action("SAME")])
    assert len(registry) == 0


def test_plugin_returning_none_registers_nothing() -> None:
    registry = ActionRegistry()
    assert registry.add_plugin_actions("quiet", None) == []
    assert len(registry) == 0


def test_host_registers_actions_each_plugin_provides_through_the_hook() -> None:
    hookspec = pluggy.HookspecMarker("agentplug_test")
    hookimpl = pluggy.HookimplMarker("agentplug_test")

    class Spec:
        @hookspec
        def provide_actions(self) -> list[Action]:  # type: ignore[empty-body]
            """Actions a plugin contributes."""

    class Weather:
        @hookimpl
        def provide_actions(self) -> list[Action]:
            return [make_action("CHECK_WEATHER")]

    class Admin:
        @hookimpl
        def provide_actions(self) -> list[Action]:
            return [make_action("RESTART_AGENT")]

    manager = pluggy.PluginManager("agentplug_test")
    manager.add_hookspecs(Spec)
    manager.register(Weather(), name="weather")
    manager.register(Admin(), name="admin")
    registry = ActionRegistry()
    for impl in manager.hook.provide_actions.get_hookimpls():
        provided = impl.function()
        assert isinstance(provided, list)
        registry.add_plugin_actions(impl.plugin_name, provided)
    assert registry.owner_of("CHECK_WEATHER") == "weather"
    assert registry.owner_of("RESTART_AGENT") == "admin"
