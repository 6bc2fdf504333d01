"""``agent`` config checks: a model names its provider, provider options are known ones."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from agentplug import Gateway
from agentplug.agent import agent_config
from agentplug.cli.main import main
from agentplug.core.errors import ConfigError, one_line

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import run


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def _error(raw: dict[str, object]) -> str:
    with pytest.raises(ConfigError) as caught:
        agent_config(raw)
    return one_line(caught.value)


def test_a_model_without_a_provider_is_an_error_suggesting_the_openai_spelling() -> None:
    line = _error({"model": "gpt-4o-mini"})
    assert "agent.model" in line
    assert "did you mean 'openai/gpt-4o-mini'?" in line


def test_a_llama_model_without_a_provider_suggests_ollama() -> None:
    assert "did you mean 'ollama/llama3.2'?" in _error({"model": "llama3.2"})


def test_a_model_of_no_known_family_lists_the_providers() -> None:
    line = _error({"model": "mymodel"})
    assert "names no provider" in line and "openai, ollama" in line


def test_a_model_with_an_empty_part_is_an_error() -> None:
    assert "empty provider or model" in _error({"model": "openai/"})


def test_an_unknown_openai_option_is_an_error_with_a_did_you_mean() -> None:
    line = _error({"providers": {"openai": {"base_ur": "http://127.0.0.1:1/v1"}}})
    assert "agent.providers.openai.base_ur" in line
    assert "did you mean 'base_url'?" in line


def test_an_unknown_option_of_a_preset_is_an_error() -> None:
    line = _error({"providers": {"ollama": {"temprature": 0.2}}})
    assert "agent.providers.ollama.temprature" in line and "'temperature'" in line


def test_an_unknown_scripted_option_is_an_error() -> None:
    line = _error({"providers": {"scripted": {"respones": ["hi"]}}})
    assert "agent.providers.scripted.respones" in line and "'responses'" in line


def test_a_wrong_type_of_a_known_option_names_the_option() -> None:
    assert "agent.providers.openai.timeout_s" in _error(
        {"providers": {"openai": {"timeout_s": -1}}}
    )


def test_camel_case_provider_options_are_accepted() -> None:
    config = agent_config({"providers": {"openai": {"baseUrl": "http://x/v1", "apiKeyEnv": "K"}}})
    assert config.providers["openai"]["baseUrl"] == "http://x/v1"


def test_a_section_for_a_provider_agentplug_does_not_ship_is_left_to_that_provider() -> None:
    config = agent_config({"model": "echo/x", "providers": {"echo": {"anything": 1}}})
    assert config.providers == {"echo": {"anything": 1}}


def test_a_misspelt_shipped_provider_section_is_an_error() -> None:
    line = _error({"providers": {"opneai": {"base_url": "http://x/v1"}}})
    assert "agent.providers.opneai" in line and "did you mean 'openai'?" in line


def test_a_sub_agents_provider_options_are_checked_too() -> None:
    line = _error(
        {"subagents": {"r": {"description": "d", "providers": {"openai": {"bse_url": "x"}}}}}
    )
    assert "agent.subagents.r.providers.openai.bse_url" in line


def test_chat_refuses_a_bare_model_name_in_one_line_before_reading_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    monkeypatch.chdir(str(tmp_path))
    monkeypatch.delenv("AGENTPLUG_CONFIG", raising=False)
    code = main(["chat", "--no-plugins", "--model", "gpt-4o-mini"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert "did you mean 'openai/gpt-4o-mini'?" in err


def test_a_misspelt_option_never_sends_a_request_to_the_server(server: ChatServer) -> None:
    config = {
        "agent": {
            "model": "openai/m",
            "providers": {"openai": {"base_url": server.base_url, "temprature": 0}},
        }
    }
    with pytest.raises(ConfigError, match="did you mean 'temperature'"):
        Gateway.from_config(config)
    assert server.requests == []


def test_known_options_reach_the_server(server: ChatServer) -> None:
    server.reply("ok")
    config = {
        "agent": {
            "model": "openai/m",
            "tools": {"actions": False},
            "providers": {"openai": {"base_url": server.base_url, "temperature": 0.25, "seed": 7}},
        }
    }
    result = run(Gateway.from_config(config).runner.run_turn("hi", session_key="s"))
    assert result.status == "replied"
    (request,) = server.requests
    assert request["body"]["temperature"] == 0.25 and request["body"]["seed"] == 7
