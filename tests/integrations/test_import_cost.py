"""The integrations add no import cost: ``import agentplug`` (and the runner, the MCP
source, the adapters package) never imports mcp, pydantic_ai or langchain."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

HEAVY = ("mcp", "mcp_types", "pydantic_ai", "langchain", "langchain_core", "langgraph")


def _loaded_after(statements: str) -> list[str]:
    code = textwrap.dedent(
        f"""
        import json, sys
        {statements}
        heavy = {HEAVY!r}
        print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy))))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(done.stdout)
    return loaded


def test_import_agentplug_loads_no_integration_library() -> None:
    assert _loaded_after("import agentplug; agentplug.Gateway; agentplug.ToolCallPipeline") == []


def test_a_gateway_its_runner_and_the_adapters_package_load_no_integration_library() -> None:
    statements = (
        "import agentplug.agent, agentplug.agent.mcp, agentplug.adapters; "
        "__import__('agentplug').Gateway().runner"
    )
    assert _loaded_after(statements) == []


def test_the_cli_parser_loads_no_integration_library() -> None:
    assert _loaded_after("from agentplug.cli.main import build_parser; build_parser()") == []
