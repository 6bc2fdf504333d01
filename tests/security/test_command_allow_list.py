"""The shell allow-list (``actions.shell.allowedCommands``) against real bypass attempts.

Every line below is something ``/bin/sh`` would run; the list admits ``ls``, ``echo``,
``cat`` and ``/usr/bin/git``. A line is admitted only when every command in it starts
with one of them, written literally.
"""

from __future__ import annotations

import pytest
from agentplug.security.commands import refusal

ALLOWED = ["ls", "echo", "cat", "/usr/bin/git"]


@pytest.mark.parametrize(
    "line",
    [
        "ls -la",
        "echo 'hello; rm -rf /'",
        'echo "a | b" && ls',
        "ls | cat > out.txt 2>&1",
        "LANG=C ls",
        "cat <in.txt >>out.txt",
        "/usr/bin/git status; echo done",
        "ls # trailing comment; rm",
        "(ls; echo x)",
        "ls \\\n  -l",
        "echo $HOME",
    ],
)
def test_lines_made_only_of_listed_commands_run(line: str) -> None:
    assert refusal(line, ALLOWED) is None


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("rm -rf /", "'rm' is not in"),
        ("ls; rm -rf /", "'rm' is not in"),
        ("ls && rm x", "'rm' is not in"),
        ("ls || rm x", "'rm' is not in"),
        ("ls | sh", "'sh' is not in"),
        ("ls & rm x", "'rm' is not in"),
        ("ls\nrm x", "'rm' is not in"),
        ("(rm x)", "'rm' is not in"),
        ("{ rm x; }", "'{' is not in"),
        ("ls $(rm x)", "command substitution"),
        ('echo "$(rm x)"', "command substitution"),
        ("echo `rm x`", "command substitution"),
        ('echo "`rm x`"', "command substitution"),
        ("cat <(rm x)", "process substitution"),
        ("'rm' x", "'rm' is not in"),
        ('"rm" x', "'rm' is not in"),
        ("r\\m x", "'rm' is not in"),
        ("$CMD x", "expansion or a glob"),
        ('"$CMD" x', "expansion or a glob"),
        ("${X:-rm} x", "expansion or a glob"),
        ("/bin/r* x", "expansion or a glob"),
        ("/bin/ls", "'/bin/ls' is not in"),
        ("./ls", "'./ls' is not in"),
        ("git status", "'git' is not in"),
        ("A=1 rm x", "'rm' is not in"),
        ("2>/dev/null rm x", "'rm' is not in"),
        (">out rm x", "'rm' is not in"),
        ("<&- rm x", "'rm' is not in"),
        ("exec rm x", "'exec' is not in"),
        ("eval 'rm x'", "'eval' is not in"),
        ("! rm x", "'!' is not in"),
        ("if ls; then rm x; fi", "'if' is not in"),
        ("cat <<EOF\nrm x\nEOF", "is not in"),
        ("echo 'unterminated", "unterminated single quote"),
        ("", "runs no command"),
    ],
)
def test_a_line_with_any_unlisted_or_uncheckable_command_is_refused(line: str, why: str) -> None:
    reason = refusal(line, ALLOWED)
    assert reason is not None and why in reason, reason


def test_an_empty_allow_list_admits_every_line() -> None:
    assert refusal("rm -rf / ; $(anything)", []) is None
