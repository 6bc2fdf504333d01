"""The JavaScript runner of the worker: the prelude, the result encoder and the V8 isolate.

Part of the sandbox worker (see ``agentplug/sandbox/_worker.py``), loaded by the worker script
as the top-level package ``_worker_parts`` before it confines itself: standard library only,
and relative imports only, so that it never loads agentplug.
"""

from __future__ import annotations

import json
from typing import Any

from .runtime import Channel

__all__ = ["new_isolate", "run_javascript"]

_JS_PRELUDE = r"""
(function (raw, paramsJson) {
  const params = Object.freeze(JSON.parse(paramsJson));
  async function fetch(url, options) {
    const o = options || {};
    const reply = JSON.parse(await raw(JSON.stringify({
      url: String(url), method: String(o.method || 'GET').toUpperCase(),
      headers: o.headers || {},
      body: o.body === undefined || o.body === null ? null : String(o.body)
    })));
    if (reply.error) { throw new Error(reply.error); }
    const body = reply.body;
    return Object.freeze({
      status: reply.status, ok: reply.status >= 200 && reply.status < 300,
      headers: Object.freeze(reply.headers || {}),
      text: async () => body, json: async () => JSON.parse(body)
    });
  }
  const fixed = {writable: false, configurable: false};
  Object.defineProperty(globalThis, 'params', Object.assign({value: params}, fixed));
  Object.defineProperty(globalThis, 'fetch', Object.assign({value: fetch}, fixed));
  // console exists in the seed's Node VM; here its output is discarded.
  const noop = function () {};
  const con = Object.freeze({log: noop, info: noop, warn: noop, error: noop, debug: noop});
  Object.defineProperty(globalThis, 'console', Object.assign({value: con}, fixed));
})
"""

_JS_ENCODE = r"""
(function (v) {
  if (v === undefined || v === null) { return 'Done'; }
  if (typeof v === 'string') { return v; }
  try { const s = JSON.stringify(v); return s === undefined ? String(v) : s; }
  catch (e) { return String(v); }
})
"""


async def new_isolate() -> Any:
    """A new V8 isolate (``MiniRacer``), created before the job's limits are applied."""
    # Created inside our event loop so that mini-racer uses it (instead of a thread of its
    # own), and before the per-job memory rlimits: V8 reserves its code range up front.
    from py_mini_racer import MiniRacer

    return MiniRacer()


async def run_javascript(job: dict[str, Any], channel: Channel, mr: Any) -> str:
    """Run the job's JavaScript in the isolate ``mr``; returns its encoded result."""
    mr.set_hard_memory_limit(int(job["memory_mb"]) * 1024 * 1024)

    async def raw_fetch(*args: Any) -> str:
        payload = json.loads(str(args[0]))
        reply = await channel.fetch(payload)
        if reply.get("error"):
            return json.dumps({"error": str(reply["error"])})
        return json.dumps(
            {"status": reply["status"], "headers": reply.get("headers"), "body": reply["body"]}
        )

    async with mr.wrap_py_function(raw_fetch) as js_fetch:
        installer: Any = mr.eval(_JS_PRELUDE)
        installer(js_fetch, json.dumps({str(k): str(v) for k, v in dict(job["params"]).items()}))
        source = (
            "(async function () { const __encode = "
            + _JS_ENCODE
            + "; return __encode(await (async function (params, fetch) {\n"
            + str(job["code"])
            + "\n}).call(undefined, globalThis.params, globalThis.fetch)); })()"
        )
        promise: Any = mr.eval(source)
        value = await promise
    return str(value)
