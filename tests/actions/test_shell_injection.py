"""Shell handler: no parameter value can inject, and the terminal service's rules hold."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from agentplug.actions.shell_handler import (
    ShellHandlerDef,
    ShellTemplateError,
    render_command,
    run_shell_handler,
)
from agentplug.actions.terminal import LocalTerminalService, TerminalResult

# Every payload would create ./canary (the terminal's cwd) if any part of it ran.
PAYLOADS = [
    "; touch canary",
    ";touch canary;",
    "&& touch canary",
    "|| touch canary",
    "| touch canary",
    "& touch canary",
    "x & touch canary &",
    "$(touch canary)",
    "`touch canary`",
    "'; touch canary; '",
    '"; touch canary; "',
    "'\"; touch canary; \"'",
    "' || touch canary || '",
    '" && touch canary && "',
    "\\'; touch canary; \\'",
    '\\"; touch canary; \\"',
    "\\\\'; touch canary #",
    "x\ntouch canary",
    "\ntouch canary\n",
    "x\rtouch canary",
    "x\r\ntouch canary",
    "$(touch${IFS}canary)",
    ";touch${IFS}canary",
    "${IFS}; touch canary",
    "> canary",
    ">> canary",
    "2> canary",
    "< /etc/hostname > canary",
    "x > canary",
    "*",
    "?",
    "[a-z]*",
    "{touch,canary}",
    "{ touch canary; }",
    "(touch canary)",
    "~",
    "~root",
    "$HOME",
    "${HOME}",
    "$((1+1))",
    "$0 $$ $? $!",
    "'$(touch canary)'",
    '"$(touch canary)"',
    "$'\\x3b' touch canary",
    "!touch canary",
    "#; touch canary",
    "\u2018; touch canary; \u2019",
    "\u201c$(touch canary)\u201d",
    "\uff04(touch canary)",
    "%s %n %x",
    "a'b\"c$d`e\\f",
    "'",
    '"',
    "\\",
    "trailing backslash \\",
    "",
    "touch canary",
    "\t; touch canary",
    "$(IFS=_;cmd=touch_canary;$cmd)",
]

CONTEXTS = {
    "bare": "printf '%s' {{v}}",
    "double-quoted": "printf '%s' \"{{v}}\"",
    "single-quoted": "printf '%s' '{{v}}'",
}
EMBEDDED_CONTEXTS = {
    "bare-embedded": ("printf '%s' x{{v}}y", "x{}y"),
    "double-quoted-embedded": ("printf '%s' \"pre {{v}} post\"", "pre {} post"),
    "single-quoted-embedded": ("printf '%s' 'pre {{v}} post'", "pre {} post"),
}


def _terminal(tmp_path: Path) -> LocalTerminalService:
    # A file the glob payloads would match if they were expanded.
    (tmp_path / "afile").write_text("x")
    return LocalTerminalService(tmp_path)


async def _run_command(terminal: LocalTerminalService, command: str) -> TerminalResult:
    return await terminal.run(command, cwd=None, timeout_s=10, max_output_bytes=1 << 16)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_payload_cannot_inject_and_arrives_literally(tmp_path: Path, payload: str) -> None:
    terminal = _terminal(tmp_path)
    cases = [(tpl, "{}") for tpl in CONTEXTS.values()] + list(EMBEDDED_CONTEXTS.values())

    async def main() -> None:
        for template, expected_shape in cases:
            command = render_command(template, {"v": payload}, ["v"])
            result = await _run_command(terminal, command)
            assert not (tmp_path / "canary").exists(), (template, payload, command)
            assert result.exit_code == 0, (template, payload, result)
            assert result.output == expected_shape.format(payload), (template, command)

    asyncio.run(main())


def test_there_are_at_least_forty_payloads() -> None:
    assert len(set(PAYLOADS)) >= 40


@pytest.mark.parametrize("payload", ["-rf", "--output=canary", "-exec touch canary ;", "-"])
def test_option_like_value_starting_a_word_is_refused(payload: str) -> None:
    for template in CONTEXTS.values():
        with pytest.raises(ShellTemplateError, match="starts with '-'"):
            render_command(template, {"v": payload}, ["v"])


@pytest.mark.parametrize("payload", ["-rf", "--output=canary", "--help", "-n"])
def test_option_like_value_after_double_dash_is_an_operand(tmp_path: Path, payload: str) -> None:
    terminal = _terminal(tmp_path)
    (tmp_path / payload).write_text("content of the file")
    command = render_command("cat -- {{v}}", {"v": payload}, ["v"])
    result = asyncio.run(_run_command(terminal, command))
    assert result.exit_code == 0
    assert result.output == "content of the file"
    assert not (tmp_path / "canary").exists()


def test_option_like_value_inside_a_fixed_word_is_not_an_option(tmp_path: Path) -> None:
    terminal = _terminal(tmp_path)
    command = render_command("printf '%s' --name={{v}}", {"v": "-rf; touch canary"}, ["v"])
    result = asyncio.run(_run_command(terminal, command))
    assert result.output == "--name=-rf; touch canary"
    assert not (tmp_path / "canary").exists()


def test_double_dash_does_not_carry_over_to_the_next_command() -> None:
    with pytest.raises(ShellTemplateError, match="starts with '-'"):
        render_command("echo -- a; rm {{v}}", {"v": "-rf"}, ["v"])


def test_nul_byte_in_a_value_is_refused() -> None:
    with pytest.raises(ShellTemplateError, match="NUL"):
        render_command("printf '%s' {{v}}", {"v": "a\x00; touch canary"}, ["v"])


@pytest.mark.parametrize(
    ("template", "where"),
    [
        ("echo `{{v}}`", "backticks"),
        ('echo "`{{v}}`"', "backticks"),
        ("echo $({{v}})", r"\$\(\.\.\.\)"),
        ('echo "$(echo {{v}})"', r"\$\(\.\.\.\)"),
        ("echo $(( {{v}} + 1 ))", "arithmetic"),
        ("echo ${X:-{{v}}}", r"\$\{\.\.\.\}"),
        ("cat <<EOF\n{{v}}\nEOF", "heredoc body"),
        ("cat <<-EOF\n\t{{v}}\n\tEOF", "heredoc body"),
        ("cat <<{{v}}\nx\n", "heredoc delimiter"),
        ("echo $'{{v}}'", r"\$'\.\.\.'"),
        ("echo hi # {{v}}", "comment"),
        ("echo ${{v}}", "follows '\\$'"),
        ('echo "${{v}}"', "follows '\\$'"),
        ("echo \\{{v}}", "backslash"),
        ('echo "\\{{v}}"', "backslash"),
    ],
)
def test_unsafe_context_is_refused_naming_the_parameter(template: str, where: str) -> None:
    with pytest.raises(ShellTemplateError, match=where) as info:
        render_command(template, {"v": "x"}, ["v"])
    assert "'v'" in str(info.value)


@pytest.mark.parametrize("template", ["echo 'unterminated {{v}}", 'echo "open', "echo $(open"])
def test_malformed_template_is_refused(template: str) -> None:
    with pytest.raises(ShellTemplateError, match="unterminated"):
        render_command(template, {"v": "x"}, ["v"])


def test_only_declared_parameters_are_substituted() -> None:
    command = render_command("echo {{v}} {{other}}", {"v": "a", "other": "$(x)"}, ["v"])
    assert command == "echo 'a' {{other}}"


def test_missing_value_for_a_declared_parameter_is_refused() -> None:
    with pytest.raises(ShellTemplateError, match="missing value"):
        render_command("echo {{v}}", {}, ["v"])


def test_heredoc_text_outside_placeholders_is_kept(tmp_path: Path) -> None:
    terminal = _terminal(tmp_path)
    command = render_command("cat <<EOF\nhello\nEOF\nprintf '%s' {{v}}", {"v": "$(x)"}, ["v"])
    result = asyncio.run(_run_command(terminal, command))
    assert result.output == "hello\n$(x)"


# ------------------------------------------------------------------ terminal service


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    result = asyncio.run(
        terminal.run(
            "sleep 60 & echo $! > bg.pid; trap '' TERM; sleep 60",
            cwd=None,
            timeout_s=1,
            max_output_bytes=1000,
        )
    )
    assert result.timed_out
    assert result.exit_code is None
    assert _wait_dead(int((tmp_path / "bg.pid").read_text()))


def test_background_job_does_not_outlive_the_command(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    result = asyncio.run(
        terminal.run(
            "sleep 60 & echo $! > bg.pid; echo done",
            cwd=None,
            timeout_s=20,
            max_output_bytes=1000,
        )
    )
    assert not result.timed_out
    assert result.exit_code == 0
    assert result.output == "done\n"
    assert _wait_dead(int((tmp_path / "bg.pid").read_text()))


def test_output_is_bounded_and_truncation_is_marked(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    chunks: list[str] = []
    result = asyncio.run(
        terminal.run(
            "head -c 200000 /dev/zero | tr '\\0' a; echo err >&2",
            cwd=None,
            timeout_s=10,
            max_output_bytes=1000,
            on_output=chunks.append,
        )
    )
    assert result.truncated
    assert result.output == "a" * 1000
    assert "".join(chunks) == result.output
    assert result.exit_code == 0


def test_stderr_is_captured_with_stdout(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    result = asyncio.run(
        terminal.run("echo out; echo err >&2", cwd=None, timeout_s=10, max_output_bytes=1000)
    )
    assert result.output == "out\nerr\n"
    assert not result.truncated


def test_environment_is_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTPLUG_HOST_SECRET_TOKEN", "s3cr3t-value-123")
    terminal = LocalTerminalService(tmp_path)
    result = asyncio.run(terminal.run("env", cwd=None, timeout_s=10, max_output_bytes=10000))
    assert "s3cr3t-value-123" not in result.output
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert set(env) <= {"PATH", "LANG", "HOME", "PWD", "SHLVL", "_", "OLDPWD"}
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert env["HOME"] == str(tmp_path.resolve())


def test_working_directory_is_the_operators(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    terminal = LocalTerminalService(work)
    result = asyncio.run(terminal.run("pwd", cwd=None, timeout_s=10, max_output_bytes=1000))
    assert result.output.strip() == str(work.resolve())


def test_missing_working_directory_is_refused_clearly(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LocalTerminalService(tmp_path / "nope")


def test_cwd_outside_the_operators_directory_is_refused(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    terminal = LocalTerminalService(work)
    with pytest.raises(ValueError, match="outside"):
        asyncio.run(terminal.run("pwd", cwd="..", timeout_s=10, max_output_bytes=1000))


def test_shell_handler_reports_success(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    defn = ShellHandlerDef(command="printf 'hello %s' {{name}}")
    out = asyncio.run(run_shell_handler(defn, {"name": "$(id)"}, ["name"], terminal=terminal))
    assert out.ok
    assert out.output == "hello $(id)"


def test_shell_handler_reports_exit_status(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    defn = ShellHandlerDef(command="echo failing; exit 3")
    out = asyncio.run(run_shell_handler(defn, {}, [], terminal=terminal))
    assert not out.ok
    assert out.output == "failing\n[exit status 3]"


def test_shell_handler_reports_timeout(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    defn = ShellHandlerDef(command="sleep 30")
    out = asyncio.run(run_shell_handler(defn, {}, [], terminal=terminal, timeout_s=0.5))
    assert not out.ok
    assert "timed out" in out.output


def test_shell_handler_refuses_unsafe_values_without_running(tmp_path: Path) -> None:
    terminal = LocalTerminalService(tmp_path)
    defn = ShellHandlerDef(command="touch ran; rm {{path}}")
    out = asyncio.run(run_shell_handler(defn, {"path": "-rf"}, ["path"], terminal=terminal))
    assert not out.ok
    assert out.output.startswith("Refused:")
    assert not (tmp_path / "ran").exists()


def test_shell_handler_def_parses_the_seed_shape() -> None:
    defn = ShellHandlerDef.model_validate(
        {"type": "shell", "command": "curl -s https://api.example.com/status?q={{query}}"}
    )
    command = render_command(defn.command, {"query": "a b;c"}, ["query"])
    assert command == "curl -s https://api.example.com/status?q='a b;c'"
