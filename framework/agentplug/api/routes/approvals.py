"""Approvals and standing grants (:class:`ApprovalRoutes`).

``GET /api/approvals``, ``POST /api/approvals/{id}``, ``GET /api/approvals/grants`` and
``DELETE /api/approvals/grants/{id}``, resolved through the runtime service ``approvals``.
With a shared broker (``agentplug serve``) the list and the decisions go through the state
store: an approval pending on any gateway sharing it is listed and decided here.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.api.responses import _error, _jsonable
from agentplug.api.routes.base import ApiBase
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver, parse_decision
from agentplug.services.approvals.shared import expire_pending, list_pending, stored_decision
from agentplug.store import StateStoreUnavailable

APPROVALS_SERVICE = "approvals"
"""Runtime service name of the :class:`ApprovalBroker` the API resolves approvals through."""


class ApprovalRoutes(ApiBase):
    """The approval endpoints of :class:`~agentplug.api.app.ControlApi`."""

    def _approvals(self) -> tuple[ApprovalBroker, ProgrammaticResolver]:
        broker = self.host.actions.get_service(APPROVALS_SERVICE)
        if not isinstance(broker, ApprovalBroker):
            raise HTTPException(
                503,
                f"no ApprovalBroker is registered as runtime service {APPROVALS_SERVICE!r}; "
                "`agentplug serve` wires one (embedding hosts: see agentplug.api.serve."
                "wire_approvals)",
            )
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
                return _error(503, f"cannot list pending approvals: {exc}")
        pending = [
            {**p.summary(), "params": _jsonable(p.params), "created_at": p.created_at}
            for p in resolver.pending
        ]
        return JSONResponse({"pending": pending})

    async def approvals_resolve(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        body = await self._body(request)
        decision = body.get("decision")
        if not isinstance(decision, str):
            return _error(400, "'decision' must be one of allow-once, allow-always, deny")
        broker, resolver = self._approvals()
        if broker.shared:
            # Pending approvals of every gateway sharing the store; decided exactly once.
            try:
                known = stored_decision(broker.store, approval_id) is not None or any(
                    r["id"] == approval_id for r in list_pending(broker.store)
                )
                reply = resolver.resolve(approval_id, decision)
            except StateStoreUnavailable as exc:
                return _error(503, f"approval {approval_id!r} was not decided: {exc}")
            if not reply.ok:
                return _error(400 if known else 404, reply.message)
        else:
            if approval_id not in {p.id for p in resolver.pending}:
                return _error(404, resolver.resolve(approval_id, decision).message)
            reply = resolver.resolve(approval_id, decision)
            if not reply.ok:
                return _error(400, reply.message)
        return JSONResponse(
            {
                "ok": True,
                "id": approval_id,
                "decision": parse_decision(decision),
                "message": reply.message,
            }
        )

    async def grants_list(self, request: Request) -> Response:
        broker, _ = self._approvals()
        return JSONResponse({"grants": [g.to_dict() for g in broker.list_grants()]})

    async def grants_revoke(self, request: Request) -> Response:
        grant_id = request.path_params["grant_id"]
        broker, _ = self._approvals()
        if not broker.revoke_grant(grant_id):
            return _error(404, f"no standing grant {grant_id!r}")
        return JSONResponse({"revoked": grant_id})
