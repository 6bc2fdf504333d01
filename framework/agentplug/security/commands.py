"""The operator's command allow-list for shell command lines (``actions.shell.allowedCommands``).

When the list is empty every command line may run (the shell switch alone decides). When
it names programs, :func:`refusal` reads the line the way ``/bin/sh`` would split it and
refuses it unless **every** simple command in it starts with a listed program:

* the line is split at ``;``, ``&``, ``|``, ``&&``, ``||``, newlines and ``(``/``)``, so
  ``ls; rm -rf x`` or ``ls | sh`` are checked command by command;
* leading ``NAME=value`` assignments and redirections (``>out``, ``2>&1``, ``<in``) are
  skipped; quotes and backslashes are removed, so ``'rm'`` or ``r\\m`` are ``rm``;
* command substitution (`` `...` ``, ``$(...)``) and process substitution (``<(...)``)
  are refused anywhere: their contents would run unchecked;
* a command word that comes from an expansion (``$CMD``, ``"${X}"``) or a glob
  (``/bin/r*``) is refused: what runs cannot be known before the shell expands it;
* a listed bare name (``ls``) admits only the bare word, found through the terminal's
  fixed ``PATH``; a listed path (``/usr/bin/git``) admits exactly that path.

Heredoc bodies and comments are read as commands too, which can only refuse more. What the
list cannot see: a listed program that runs its arguments (``sh``, ``env``, ``xargs``,
``find -exec``, ``timeout``, an interpreter) admits anything; list only programs that do not.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["refusal"]

_SEPARATORS = frozenset(";&|()\n")
_REDIRECTS = frozenset("<>")
_GLOBS = frozenset("*?[")


class _Word:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.expanded = False  # holds an unquoted or double-quoted $ or a glob
        self.started = False

    def add(self, char: str) -> None:
        self.text.append(char)
        self.started = True

    @property
    def value(self) -> str:
        return "".join(self.text)


class _Refused(Exception):
    pass


def _split(line: str) -> list[list[tuple[str, bool, bool]]]:
    """Simple commands, each a list of ``(word, expanded, is_redirect_operator)``."""
    commands: list[list[tuple[str, bool, bool]]] = [[]]
    word = _Word()
    i = 0

    def end_word() -> None:
        nonlocal word
        if word.started:
            commands[-1].append((word.value, word.expanded, False))
        word = _Word()

    while i < len(line):
        c = line[i]
        nxt = line[i + 1] if i + 1 < len(line) else ""
        if c == "\\":
            if nxt == "\n":
                i += 2
                continue
            word.add(nxt)
            i += 2
            continue
        if c == "'":
            end = line.find("'", i + 1)
            if end < 0:
                raise _Refused("an unterminated single quote")
            word.started = True
            word.text.extend(line[i + 1 : end])
            i = end + 1
            continue
        if c == '"':
            j = i + 1
            word.started = True
            while j < len(line) and line[j] != '"':
                if line[j] == "\\" and j + 1 < len(line):
                    word.add(line[j + 1])
                    j += 2
                    continue
                if line[j] == "`" or line.startswith("$(", j):
                    raise _Refused("command substitution")
                if line[j] == "$":
                    word.expanded = True
                word.add(line[j])
                j += 1
            if j >= len(line):
                raise _Refused("an unterminated double quote")
            i = j + 1
            continue
        if c == "`" or (c == "$" and nxt == "("):
            raise _Refused("command substitution")
        if c in _REDIRECTS and nxt == "(":
            raise _Refused("process substitution")
        if c == "#" and not word.started:
            end = line.find("\n", i)
            i = len(line) if end < 0 else end
            continue
        if c in " \t":
            end_word()
            i += 1
            continue
        if c in _SEPARATORS:
            end_word()
            commands.append([])
            i += 1
            continue
        if c in _REDIRECTS:
            # A redirection: the digits just read (2>) belong to it, not to a word.
            if word.value.isdigit():
                word = _Word()
            end_word()
            j = i + 1
            for chars in ("<>", "&|", "-"):  # <, >, >>, <<, <<-, <&, >&, <>, >|, <&-, >&-
                if j < len(line) and line[j] in chars:
                    j += 1
            commands[-1].append((line[i:j], False, True))
            i = j
            continue
        if c == "$" or c in _GLOBS:
            word.expanded = True
        word.add(c)
        i += 1
    end_word()
    return [command for command in commands if command]


def _program(command: list[tuple[str, bool, bool]]) -> tuple[str, bool] | None:
    """The command word of one simple command (``None`` when there is none)."""
    skip_target = False
    for text, expanded, is_redirect in command:
        if is_redirect:
            # Every operator but the fd-closing ones (<&-, >&-) takes the next word.
            skip_target = text not in ("<&-", ">&-")
            continue
        if skip_target:
            skip_target = False
            continue
        name, eq, _ = text.partition("=")
        if eq and name and (name[0].isalpha() or name[0] == "_") and name.isidentifier():
            continue  # NAME=value before the command
        return text, expanded
    return None


def refusal(command_line: str, allowed: Collection[str]) -> str | None:
    """Why ``command_line`` may not run under the allow-list ``allowed``; ``None`` if it may.

    An empty ``allowed`` admits every line.
    """
    if not allowed:
        return None
    permitted = set(allowed)
    try:
        commands = _split(command_line)
    except _Refused as exc:
        return f"the command line contains {exc}, which the allow-list cannot check"
    if not commands:
        return "the command line runs no command"
    for command in commands:
        found = _program(command)
        if found is None:
            continue  # only assignments or redirections: runs nothing
        program, expanded = found
        if expanded:
            return (
                f"the command word {program!r} is an expansion or a glob; write the "
                "program's name literally"
            )
        if program not in permitted:
            return f"{program!r} is not in actions.shell.allowedCommands"
    return None
