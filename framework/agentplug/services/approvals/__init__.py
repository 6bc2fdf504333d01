"""Approval of tool calls that a ``before_tool_call`` handler (or policy) asked to approve.

The broker asks a resolver (terminal prompt, chat ``/approve`` command, API, test
double) and waits within the request's budget (``timeout_ms``; default 120 s, at most
600 s). Only an *offered* ``allow-once`` or ``allow-always`` lets the call run; deny,
timeout, a missing resolver and a cancelled run each block with their own
user-readable reason. ``on_resolution`` is called with the resolution (``allow-once``,
``allow-always``, ``deny``, ``timeout``, ``cancelled``); its failures are only logged.

Resolvers:

* :class:`TerminalResolver`: prints the request to a stream and reads the answer
  (``allow-once``/``once``/``o``, ``allow-always``/``always``/``a``, ``deny``/``d``);
* :class:`ProgrammaticResolver`: for hosts and chat: pending approvals are listed with
  ids and resolved with :meth:`ProgrammaticResolver.resolve` or
  :meth:`ProgrammaticResolver.handle_command` (``/approve <id> allow-once``);
* :class:`ScriptedResolver`: tests and scenarios.

**Standing grants.** ``allow-always`` is remembered in the state store (namespace
``approvals.grants``). A grant is keyed by its *scope*: the requesting plugin id (as
stamped by the runtime, never what the plugin wrote), the tool name, the request
``title`` and ``severity`` (see :func:`grant_id_for`). The same request later resolves
without asking; a request with another title, a higher/lower severity, another tool or
from another plugin asks again. The description is deliberately *not* part of the
scope (it usually embeds the call's arguments, which would make ``allow-always``
useless). A grant applies only when the new request still offers ``allow-always``.
Grants survive a restart with :class:`~agentplug.store.SQLiteStore`; list and revoke
them with :meth:`ApprovalBroker.list_grants` / :meth:`ApprovalBroker.revoke_grant` or
``agentplug approvals list|revoke``.
"""

from __future__ import annotations

from agentplug.services.approvals.broker import ApprovalBroker
from agentplug.services.approvals.grants import (
    GRANTS_NAMESPACE,
    Grant,
    grant_id_for,
    list_grants,
    revoke_grant,
)
from agentplug.services.approvals.models import (
    Answer,
    ApprovalPrompter,
    ApprovalResolver,
    ApprovalVerdict,
    Decision,
    PendingApproval,
    parse_decision,
)
from agentplug.services.approvals.programmatic import ProgrammaticResolver, ResolveReply
from agentplug.services.approvals.scripted import ScriptedResolver
from agentplug.services.approvals.terminal import TerminalResolver

__all__ = [
    "GRANTS_NAMESPACE",
    "Answer",
    "ApprovalBroker",
    "ApprovalPrompter",
    "ApprovalResolver",
    "ApprovalVerdict",
    "Decision",
    "Grant",
    "PendingApproval",
    "ProgrammaticResolver",
    "ResolveReply",
    "ScriptedResolver",
    "TerminalResolver",
    "grant_id_for",
    "list_grants",
    "parse_decision",
    "revoke_grant",
]
