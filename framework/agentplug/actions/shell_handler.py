"""The ``shell`` custom-action handler: ``{type: "shell", command}``.

Parameter values are untrusted (they are extracted from a conversation). They are put into
the operator's command template so that no value can ever be interpreted by the shell:

* the template is scanned with a small POSIX-shell-aware tokenizer that knows, at every
  ``{{param}}``, whether it sits in a bare word, inside double quotes or inside single
  quotes;
* the value is always emitted as one single-quoted string (``'`` inside it becomes
  ``'"'"'``). Inside double quotes the double quote is closed first and reopened after,
  inside single quotes the single quote likewise, so the value always ends up in a
  single-quoted segment, where the shell interprets nothing (no ``$``, backslash, glob,
  newline or quote processing);
* contexts where this cannot be done safely are refused with an error naming the
  parameter: inside backticks, ``$(...)``, ``$((...))``, ``${...}``, ``$'...'``, heredoc
  bodies or delimiters, comments, or right after ``$`` or an unquoted backslash;
* NUL bytes are refused (they cannot be passed to a process at all);
* **option injection**: quoting does not stop a value like ``-rf`` or ``--output=x`` from
  being read as an option when it starts a word. Prefixing it (``./-rf``) would change
  the value, so instead such a value is *refused*, unless the template ends option
  parsing with a bare ``--`` word earlier in the same command (then it is a plain
  operand). Template authors who want to accept leading dashes write ``cmd -- {{v}}``.
  A value that does not start a word (``--name={{v}}``) is part of a fixed word and is
  fine.

Only declared parameters are substituted; an undeclared ``{{x}}`` stays as literal text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.terminal import TerminalResult, TerminalService

__all__ = [
    "ShellHandlerDef",
    "ShellTemplateError",
    "render_command",
    "run_shell_handler",
    "shell_output",
]

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}")
_OPERATOR_CHARS = frozenset(";&|()<>")
_WHITESPACE = frozenset(" \t")


class ShellTemplateError(ValueError):
    """A template or a parameter value that cannot be rendered safely."""


class ShellHandlerDef(BaseModel):
    """A ``shell`` handler definition: the command template with ``{{param}}`` slots."""

    model_config = ConfigDict(frozen=True)

    type: Literal["shell"] = "shell"
    command: str


def _single_quote(value: str) -> str:
    # POSIX: nothing is special inside '...'; a ' is written as '"'"' (close, a
    # double-quoted ', reopen).
    return "'" + value.replace("'", "'\"'\"'") + "'"


class _Renderer:
    """One pass over the template; state is the quoting context at the current position."""

    def __init__(self, template: str, params: Mapping[str, str], declared: Collection[str]):
        self.t = template
        self.params = params
        self.declared = set(declared)
        self.out: list[str] = []
        self.i = 0
        # Stack of open constructs: "dq" (double quotes), "cmd" ($(...)), "arith"
        # ($((...))), "brace" (${...}), "bq" (backticks). Single quotes, $'..', comments
        # and heredocs are consumed in one go by their own scanners.
        self.stack: list[str] = []
        self.word_started = False
        self.word_text = ""
        self.end_of_options = False
        self.pending_heredocs: list[tuple[str, bool]] = []

    # ------------------------------------------------------------------ helpers
    def _placeholder_at(self, i: int) -> re.Match[str] | None:
        m = _PLACEHOLDER.match(self.t, i)
        if m is not None and m.group(1) in self.declared:
            return m
        return None

    def _refuse_if_placeholder(self, start: int, end: int, where: str) -> None:
        for m in _PLACEHOLDER.finditer(self.t, start, end):
            if m.group(1) in self.declared:
                raise ShellTemplateError(
                    f"parameter {m.group(1)!r} appears {where}, where its value cannot be "
                    "escaped safely; move it to a plain word or a quoted string"
                )

    def _unsafe(self) -> str | None:
        names = {
            "cmd": "inside $(...)",
            "arith": "inside an arithmetic expansion $((...))",
            "brace": "inside a ${...} expansion",
            "bq": "inside backticks",
        }
        for frame in self.stack:
            if frame in names:
                return names[frame]
        return None

    def _end_word(self) -> None:
        if self.word_started and self.word_text == "--" and not self.stack:
            self.end_of_options = True
        self.word_started = False
        self.word_text = ""

    def _end_command(self) -> None:
        self._end_word()
        self.end_of_options = False

    def _value(self, name: str) -> str:
        value = self.params.get(name)
        if value is None:
            raise ShellTemplateError(f"missing value for parameter {name!r}")
        value = str(value)
        if "\x00" in value:
            raise ShellTemplateError(f"parameter {name!r} contains a NUL byte, which is refused")
        return value

    def _emit_placeholder(self, m: re.Match[str], context: str) -> None:
        name = m.group(1)
        where = self._unsafe()
        if where is not None:
            raise ShellTemplateError(
                f"parameter {name!r} appears {where}, where its value cannot be escaped "
                "safely; move it to a plain word or a quoted string"
            )
        prev = self.t[m.start() - 1] if m.start() > 0 else ""
        if prev == "$" and context != "sq":
            raise ShellTemplateError(
                f"parameter {name!r} directly follows '$', which would turn its value into "
                "an expansion; add a space or quote the '$'"
            )
        value = self._value(name)
        if value.startswith("-") and not self.word_started and not self.end_of_options:
            raise ShellTemplateError(
                f"parameter {name!r} starts with '-' and begins a word, so the command "
                "could read it as an option; the template must put a '--' word before it "
                "to accept such values"
            )
        quoted = _single_quote(value)
        if context == "dq":
            quoted = '"' + quoted + '"'
        elif context == "sq":
            quoted = "'" + quoted + "'"
        self.out.append(quoted)
        self.word_started = True
        self.word_text += value

    # ----------------------------------------------------------------- scanners
    def _scan_single_quoted(self) -> None:
        # At the opening quote. Placeholders are allowed: close, insert, reopen.
        self.out.append("'")
        self.i += 1
        while True:
            if self.i >= len(self.t):
                raise ShellTemplateError("unterminated single quote in the command template")
            m = self._placeholder_at(self.i)
            if m is not None:
                self._emit_placeholder(m, "sq")
                self.i = m.end()
                continue
            c = self.t[self.i]
            self.out.append(c)
            self.i += 1
            if c == "'":
                return
            self.word_started = True
            self.word_text += c

    def _scan_ansi_c(self) -> None:
        # $'...': backslash escapes are interpreted there (bash); never put values in it.
        start = self.i
        j = self.i + 2
        while j < len(self.t) and self.t[j] != "'":
            j += 2 if self.t[j] == "\\" else 1
        if j >= len(self.t):
            raise ShellTemplateError("unterminated $'...' in the command template")
        self._refuse_if_placeholder(start, j + 1, "inside $'...'")
        self.out.append(self.t[start : j + 1])
        self.word_started = True
        self.i = j + 1

    def _scan_comment(self) -> None:
        j = self.t.find("\n", self.i)
        j = len(self.t) if j < 0 else j
        # A newline in a value would end the comment and start a command.
        self._refuse_if_placeholder(self.i, j, "inside a comment")
        self.out.append(self.t[self.i : j])
        self.i = j

    def _scan_heredoc_operator(self) -> None:
        # At '<<' (not '<<<'). Read the delimiter word; the body starts at the next newline.
        j = self.i + 2
        strip_tabs = j < len(self.t) and self.t[j] == "-"
        if strip_tabs:
            j += 1
        while j < len(self.t) and self.t[j] in _WHITESPACE:
            j += 1
        k = j
        while k < len(self.t) and self.t[k] not in " \t\n;&|()<>":
            k += 1
        delim_raw = self.t[j:k]
        self._refuse_if_placeholder(j, k, "in a heredoc delimiter")
        if not delim_raw:
            raise ShellTemplateError("heredoc without a delimiter in the command template")
        delim = delim_raw.replace("'", "").replace('"', "").replace("\\", "")
        self.pending_heredocs.append((delim, strip_tabs))
        self.out.append(self.t[self.i : k])
        self.i = k
        self._end_word()

    def _scan_heredoc_bodies(self) -> None:
        # Called right after a newline when heredocs are pending: copy bodies verbatim,
        # refusing placeholders (a value with a newline + the delimiter would end it).
        for delim, strip_tabs in self.pending_heredocs:
            while True:
                if self.i >= len(self.t):
                    raise ShellTemplateError(f"unterminated heredoc (missing {delim!r} line)")
                j = self.t.find("\n", self.i)
                j = len(self.t) if j < 0 else j
                line = self.t[self.i : j]
                self._refuse_if_placeholder(self.i, j, "inside a heredoc body")
                self.out.append(self.t[self.i : j + 1])
                self.i = min(j + 1, len(self.t))
                if (line.lstrip("\t") if strip_tabs else line) == delim:
                    break
        self.pending_heredocs = []

    # --------------------------------------------------------------------- main
    def render(self) -> str:
        t = self.t
        if "\x00" in t:
            raise ShellTemplateError("the command template contains a NUL byte")
        while self.i < len(t):
            in_dq = bool(self.stack) and self.stack[-1] == "dq"
            m = self._placeholder_at(self.i)
            if m is not None:
                self._emit_placeholder(m, "dq" if in_dq else "bare")
                self.i = m.end()
                continue
            c = t[self.i]
            nxt = t[self.i + 1] if self.i + 1 < len(t) else ""
            if c == "\\":
                if self._placeholder_at(self.i + 1) is not None:
                    name = self._placeholder_at(self.i + 1)
                    assert name is not None
                    raise ShellTemplateError(
                        f"parameter {name.group(1)!r} directly follows a backslash, which "
                        "would escape its opening quote"
                    )
                self.out.append(t[self.i : self.i + 2])
                self.i += 2
                self.word_started = True
                self.word_text += nxt
                continue
            if in_dq:
                if c == '"':
                    self.stack.pop()
                    self.out.append(c)
                    self.i += 1
                    continue
                if c == "`":
                    self.stack.append("bq")
                    self.out.append(c)
                    self.i += 1
                    continue
                if c == "$" and nxt in "({":
                    self._open_dollar()
                    continue
                self.out.append(c)
                self.word_started = True
                self.word_text += c
                self.i += 1
                continue
            # Unquoted (possibly inside $(...), ${...}, backticks).
            top = self.stack[-1] if self.stack else None
            if c == "'":
                self._scan_single_quoted()
                continue
            if c == '"':
                self.stack.append("dq")
                self.out.append(c)
                self.i += 1
                continue
            if c == "`":
                if top == "bq":
                    self.stack.pop()
                else:
                    self.stack.append("bq")
                self.out.append(c)
                self.i += 1
                continue
            if c == "$" and nxt == "'":
                self._scan_ansi_c()
                continue
            if c == "$" and nxt in "({":
                self._open_dollar()
                continue
            if c == "}" and top == "brace":
                self.stack.pop()
                self.out.append(c)
                self.i += 1
                continue
            if c == ")" and top in ("cmd", "arith"):
                if top == "arith" and nxt == ")":
                    self.out.append("))")
                    self.i += 2
                else:
                    self.out.append(c)
                    self.i += 1
                self.stack.pop()
                continue
            if c == "#" and not self.word_started:
                self._scan_comment()
                continue
            if c == "<" and nxt == "<" and t[self.i + 2 : self.i + 3] != "<":
                self._scan_heredoc_operator()
                continue
            if c == "\n":
                self.out.append(c)
                self.i += 1
                self._end_command()
                if self.pending_heredocs:
                    self._scan_heredoc_bodies()
                continue
            if c in _WHITESPACE:
                self._end_word()
                self.out.append(c)
                self.i += 1
                continue
            if c in _OPERATOR_CHARS:
                if c in "<>":
                    self._end_word()
                else:
                    self._end_command()
                self.out.append(c)
                self.i += 1
                continue
            self.out.append(c)
            self.word_started = True
            self.word_text += c
            self.i += 1
        if self.stack:
            raise ShellTemplateError(
                f"unterminated {self.stack[-1]!r} construct in the command template"
            )
        if self.pending_heredocs:
            raise ShellTemplateError("heredoc without a body in the command template")
        return "".join(self.out)

    def _open_dollar(self) -> None:
        t = self.t
        m = self._placeholder_at(self.i + 1)
        if m is not None:
            raise ShellTemplateError(
                f"parameter {m.group(1)!r} directly follows '$', which would turn its value "
                "into an expansion; add a space or quote the '$'"
            )
        if t.startswith("$((", self.i):
            self.stack.append("arith")
            self.out.append("$((")
            self.i += 3
        elif t.startswith("$(", self.i):
            self.stack.append("cmd")
            self.out.append("$(")
            self.i += 2
        else:
            self.stack.append("brace")
            self.out.append("${")
            self.i += 2
        self.word_started = True


def render_command(
    template: str, params: Mapping[str, str], declared_names: Collection[str]
) -> str:
    """Substitute declared ``{{param}}`` placeholders with shell-safe values.

    Raises :class:`ShellTemplateError` (a ``ValueError``) for a placeholder in a context
    that cannot be escaped safely, a NUL byte, an option-like value that starts a word
    without a preceding ``--``, a missing value, or a malformed template.
    """
    return _Renderer(template, params, declared_names).render()


async def run_shell_handler(
    defn: ShellHandlerDef,
    params: Mapping[str, str],
    declared_names: Collection[str],
    *,
    terminal: TerminalService,
    timeout_s: float = 30,
    max_output_bytes: int = 64 * 1024,
) -> HandlerOutput:
    """Render and run a ``shell`` handler through ``terminal``.

    ``ok`` is True when the command exited with status 0 within the time limit. ``output``
    is the captured output, followed by a note with the exit status, time-out or
    truncation when relevant. Template/value errors give ``ok=False`` without running.
    """
    try:
        command = render_command(defn.command, params, declared_names)
    except ShellTemplateError as exc:
        return HandlerOutput(ok=False, output=f"Refused: {exc}")
    result = await terminal.run(
        command, cwd=None, timeout_s=timeout_s, max_output_bytes=max_output_bytes
    )
    return shell_output(result, timeout_s, max_output_bytes)


def shell_output(result: TerminalResult, timeout_s: float, max_output_bytes: int) -> HandlerOutput:
    """A command's result as a handler's ``{ok, output}``: the captured output, then a note
    with the exit status, time-out or truncation when relevant; ``ok`` when it exited 0."""
    output = result.output
    notes: list[str] = []
    if result.truncated:
        notes.append(f"[output truncated to {max_output_bytes} bytes]")
    if result.timed_out:
        notes.append(f"[timed out after {timeout_s:g}s; the command was killed]")
    elif result.exit_code != 0:
        notes.append(f"[exit status {result.exit_code}]")
    if notes:
        output = (output + ("\n" if output and not output.endswith("\n") else "")) + "\n".join(
            notes
        )
    ok = result.exit_code == 0 and not result.timed_out
    return HandlerOutput(ok=ok, output=output)
