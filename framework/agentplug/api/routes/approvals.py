"""Approvals and standing grants (:class:`ApprovalRoutes`).

``GET /api/approvals``, ``POST /api/approvals/{id}``, ``GET /api/approvals/history`` (the
latest settled approvals, newest first, with who decided and when),
``GET /api/approvals/grants`` and ``DELETE /api/approvals/grants/{id}``, resolved through
the gateway's approval broker.
With a shared broker (a durable store) the list and the decisions go through the state
store: an approval pending on any gateway sharing it is listed and decided here.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.api.responses import error_response, jsonable
from agentplug.api.routes.base import ApiBase
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver, parse_decision
from agentplug.services.approvals.feed import approvals_snapshot
from agentplug.services.approvals.models import ResolveStatus
from agentplug.services.approvals.shared import expire_pending, list_pending
from agentplug.store import StateStoreUnavailable

_STATUS_CODES: dict[ResolveStatus, int] = {
    "unknown": 404,
    "invalid": 400,
    "decided": 409,
    "timed-out": 409,
    "cancelled": 409,
    "unavailable": 503,
}
"""HTTP status of each refused resolution (409: someone or something settled it first;
the message says who and when)."""


class ApprovalRoutes(ApiBase):
    """The approval endpoints of :class:`~agentplug.api.app.ControlApi`.

    Decisions taken here are recorded as decided by :attr:`approvals_by` (``api``;
    ``mcp`` for the control API of ``agentplug mcp-proxy``).
    """

    approvals_by = "api"

    def _approvals(self) -> tuple[ApprovalBroker, ProgrammaticResolver]:
        broker = self.gateway.approvals
        resolver = broker.resolver
        if not isinstance(resolver, ProgrammaticResolver):
            raise HTTPException(
                503,
                f"the approval broker's resolver is a {type(resolver).__name__}; the API "
                "resolves approvals only through a ProgrammaticResolver",
            )
        return broker, resolver

    async def approvals_list(self, request: Request) -> Response:
        broker, resolver = self._approvals()
        if broker.shared:
            try:
                expire_pending(broker.store, by=broker.gateway)  # rows of dead gateways
                return JSONResponse({"pending": list_pending(broker.store)})
            except StateStoreUnavailable as exc:
                return error_response(503, f"cannot list pending approvals: {exc}")
        pending = [
            {**p.summary(), "params": jsonable(p.params), "created_at": p.created_at}
            for p in resolver.pending
        ]
        return JSONResponse({"pending": pending})

    async def approvals_history(self, request: Request) -> Response:
        broker, _ = self._approvals()
        try:
            snapshot = approvals_snapshot(broker)
        except StateStoreUnavailable as exc:
            return error_response(503, f"cannot list settled approvals: {exc}")
        return JSONResponse({"history": snapshot["history"]})

    async def approvals_resolve(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        body = await self._body(request)
        decision = body.get("decision")
        if not isinstance(decision, str):
            return error_response(400, "'decision' must be one of allow-once, allow-always, deny")
        _, resolver = self._approvals()
        # With a shared broker this decides an approval pending on any gateway sharing the
        # store, exactly once; a loser hears who won and when.
        reply = resolver.resolve(approval_id, decision, by=self.approvals_by)
        if not reply.ok:
            extra = {"refused": reply.status, "by": reply.by, "at": reply.at}
            return error_response(_STATUS_CODES.get(reply.status, 400), reply.message, **extra)
        return JSONResponse(
            {
                "ok": True,
                "id": approval_id,
                "decision": parse_decision(decision),
                "message": reply.message,
                "by": reply.by,
                "at": reply.at,
            }
        )

    async def grants_list(self, request: Request) -> Response:
        broker, _ = self._approvals()
        return JSONResponse({"grants": [g.to_dict() for g in broker.list_grants()]})

    async def grants_revoke(self, request: Request) -> Response:
        grant_id = request.path_params["grant_id"]
        broker, _ = self._approvals()
        if not broker.revoke_grant(grant_id):
            return error_response(404, f"no standing grant {grant_id!r}")
        return JSONResponse({"revoked": grant_id})
