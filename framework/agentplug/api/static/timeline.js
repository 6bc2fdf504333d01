// The turn timeline: the latest turns (live), and for one turn every hook, model call and
// tool call on its time axis, with each handler's plugin, status and duration and the
// decisions taken (block, approval, rewrite, cancel) with their public reasons.

import { api } from "./api.js";
import { chip, h, ms, replace, when } from "./dom.js";

const DECISION_LABELS = {
  blocked_by: "blocked by",
  blocked_by_policy: "blocked by policy",
  cancelled_by: "cancelled by",
  changed_by: "rewritten by",
  decided_by: "decided by",
  handled: "handled",
  plugin_id: "claimed by",
  approval_requested_by: "approval asked by",
  approval: "approval",
  approval_by: "approved by",
  allowed: "allowed",
  reason: "reason",
  refused: "refused",
  outcome: "outcome",
  action: "action",
  env_kept: "env kept",
  env_dropped: "env dropped",
};

function decisionChips(decision) {
  const chips = [];
  for (const [key, value] of Object.entries(decision || {})) {
    if (key === "blocked" || value === null || value === undefined) continue;
    const shown = Array.isArray(value) ? value.join(", ") : String(value);
    const kind =
      key.startsWith("blocked") || (key === "allowed" && value === false)
        ? "bad"
        : key.startsWith("approval")
          ? "ask"
          : key === "changed_by" || key === "cancelled_by"
            ? "warn"
            : "";
    chips.push(chip(`${DECISION_LABELS[key] || key}: ${shown}`, `decision ${kind}`.trim()));
  }
  return chips;
}

function turnSummary(row) {
  return [
    chip(row.status, `status ${row.status}`),
    " ",
    h("code", { class: "session", text: row.session_key }),
    " ",
    h("span", { class: "muted", text: when(row.started_at) }),
    row.duration_ms !== undefined ? h("span", { class: "muted", text: ` \u00b7 ${ms(row.duration_ms)}` }) : null,
  ];
}

function entryRow(entry, total, index) {
  const start = Number(entry.start_ms || 0);
  const duration = Number(entry.duration_ms || 0);
  const bar = h("span", { class: `bar ${entry.kind}` });
  // Positions are set through the CSSOM (the policy allows no inline style attribute).
  bar.style.left = `${Math.min(100, (start / total) * 100)}%`;
  bar.style.width = `${Math.max(0.3, (duration / total) * 100)}%`;
  const handlers = (entry.handlers || []).map((handler) =>
    h(
      "li",
      { class: `handler status-${handler.status}` },
      h("code", { class: "plugin", text: handler.plugin_id }),
      " ",
      chip(handler.status, `status ${handler.status}`),
      " ",
      h("span", { class: "muted", text: ms(handler.duration_ms) }),
      handler.error ? h("span", { class: "error", text: ` ${handler.error}` }) : null,
    ),
  );
  return h(
    "li",
    {
      class: `entry ${entry.kind}${(entry.handlers || []).length ? "" : " idle"}`,
      dataset: { kind: entry.kind, name: entry.name, index: String(index) },
    },
    h(
      "div",
      { class: "entry-head" },
      h("span", { class: "kind", text: entry.kind }),
      h("span", { class: "name", text: entry.name }),
      h("span", { class: "muted at", text: `+${ms(start)} \u00b7 ${ms(duration)}` }),
    ),
    h("div", { class: "axis", "aria-hidden": "true" }, bar),
    decisionChips(entry.decision).length ? h("div", { class: "decisions" }, decisionChips(entry.decision)) : null,
    handlers.length ? h("ul", { class: "handlers" }, handlers) : null,
  );
}

/** The timeline view: ``turn(kind, row)`` adds live turns; ``open(runId)`` shows one. */
export function mountTimeline() {
  const list = document.getElementById("turns");
  const detail = document.getElementById("turn-detail");
  const turns = new Map();
  let selected = null;
  let onlyActive = false;

  function renderList() {
    const rows = [...turns.values()].sort((a, b) => b.started_at - a.started_at);
    replace(
      list,
      rows.map((row) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              href: `#/timeline/${encodeURIComponent(row.run_id)}`,
              class: row.run_id === selected ? "current" : "",
              "aria-current": row.run_id === selected ? "true" : null,
              dataset: { runId: row.run_id },
            },
            turnSummary(row),
          ),
        ),
      ),
    );
  }

  function renderDetail() {
    const row = turns.get(selected);
    if (!row) {
      replace(detail, h("p", { class: "empty", text: selected ? `Turn ${selected} is not among the latest turns.` : "Pick a turn to see every hook, model call and tool call it made." }));
      return;
    }
    const entries = row.trace || [];
    const total = Math.max(
      1,
      Number(row.duration_ms || 0),
      ...entries.map((e) => Number(e.start_ms || 0) + Number(e.duration_ms || 0)),
    );
    const shown = entries
      .map((entry, index) => [entry, index])
      .filter(([entry]) => !onlyActive || entry.kind !== "hook" || (entry.handlers || []).length);
    const toggle = h("input", { type: "checkbox", id: "only-active", checked: onlyActive });
    toggle.addEventListener("change", () => {
      onlyActive = toggle.checked;
      renderDetail();
      document.getElementById("only-active").focus();
    });
    replace(
      detail,
      h("h2", { text: `Turn ${row.run_id}` }),
      h("p", {}, turnSummary(row)),
      row.blocked_by ? h("p", {}, "Blocked by ", h("code", { text: row.blocked_by })) : null,
      row.error ? h("p", { class: "error", text: row.error }) : null,
      row.status === "running" ? h("p", { class: "muted", text: "Running: the trace comes when it ends." }) : null,
      h("p", { class: "inline" }, toggle, h("label", { for: "only-active", text: " Only hooks some plugin handles" })),
      h("ol", { class: "entries", "aria-label": "Steps in order" }, shown.map(([entry, index]) => entryRow(entry, total, index))),
      row.trace_truncated ? h("p", { class: "muted", text: "The trace was cut (too many steps)." }) : null,
    );
  }

  async function refresh() {
    try {
      const answer = await api("/api/turns?limit=100");
      for (const row of answer.turns) turns.set(row.run_id, row);
      renderList();
      renderDetail();
    } catch (err) {
      replace(detail, h("p", { class: "error", text: err.message }));
    }
  }

  return {
    show: refresh,
    open(runId) {
      selected = runId || null;
      renderList();
      renderDetail();
    },
    turn(kind, row) {
      turns.set(row.run_id, row);
      while (turns.size > 200) {
        const oldest = [...turns.values()].sort((a, b) => a.started_at - b.started_at)[0];
        turns.delete(oldest.run_id);
      }
      renderList();
      if (row.run_id === selected) renderDetail();
    },
  };
}
