// The approvals inbox: pending requests pushed by the live feed, decided with a click or
// a key; settled ones in the history below.

import { api } from "./api.js";
import { chip, h, pretty, replace, when } from "./dom.js";

const LABELS = { "allow-once": "Allow once", "allow-always": "Allow always", deny: "Deny" };
const KEYS = { "allow-once": "a", "allow-always": "Shift+A", deny: "d" };

/** Decide approval ``id``; resolves to the server's answer or throws ``ApiError``. */
export function decide(id, decision) {
  return api(`/api/approvals/${encodeURIComponent(id)}`, { method: "POST", body: { decision } });
}

function secondsLeft(row) {
  const left = Number(row.expires_at || 0) - Date.now() / 1000;
  return Math.max(0, Math.round(left));
}

/**
 * One pending approval as a focusable card with a button per offered decision.
 * ``onDecided(card)`` is called once the server accepted a decision.
 */
export function approvalCard(row, { onDecided } = {}) {
  const titleId = `approval-title-${row.id}`;
  const status = h("p", { class: "card-status", role: "alert" });
  const countdown = h("span", { class: "countdown" });
  const buttons = (row.allowed_decisions || []).map((decision) =>
    h("button", {
      type: "button",
      class: decision === "deny" ? "deny" : "allow",
      dataset: { decision },
      "aria-keyshortcuts": KEYS[decision],
      text: LABELS[decision] || decision,
      onclick: () => send(decision),
    }),
  );
  const card = h(
    "article",
    {
      class: `approval severity-${row.severity || "info"}`,
      role: "listitem",
      tabindex: "0",
      "aria-labelledby": titleId,
      dataset: { approvalId: row.id, runId: row.run_id || "" },
    },
    h(
      "header",
      {},
      chip(row.severity || "info", `severity ${row.severity || "info"}`),
      h("h3", { id: titleId, class: "title", text: row.title || "(untitled request)" }),
    ),
    h(
      "p",
      { class: "meta" },
      "Tool ",
      h("code", { class: "tool", text: row.tool_name || "?" }),
      " asked by plugin ",
      h("code", { class: "plugin", text: row.plugin_id || "?" }),
      row.gateway ? [" on ", h("code", { text: row.gateway })] : null,
      " \u00b7 ",
      countdown,
    ),
    row.description ? h("p", { class: "description", text: row.description }) : null,
    h("h4", { text: "Parameters" }),
    h("pre", { class: "params", text: pretty(row.params || {}) }),
    row.metadata && Object.keys(row.metadata).length
      ? h("details", {}, h("summary", { text: "Details" }), h("pre", { text: pretty(row.metadata) }))
      : null,
    h("div", { class: "actions" }, buttons),
    status,
  );
  const tick = () => {
    const left = secondsLeft(row);
    countdown.textContent = left > 0 ? `times out in ${left} s` : "timing out";
  };
  tick();
  card.timer = setInterval(() => (card.isConnected ? tick() : clearInterval(card.timer)), 1000);

  async function send(decision) {
    if (!(row.allowed_decisions || []).includes(decision) || card.dataset.busy) return;
    card.dataset.busy = "1";
    buttons.forEach((b) => (b.disabled = true));
    status.className = "card-status";
    status.textContent = `${LABELS[decision]}\u2026`;
    try {
      const answer = await decide(row.id, decision);
      card.classList.add("decided");
      card.dataset.decided = decision;
      status.textContent = `${LABELS[decision]} (by ${answer.by})`;
      if (onDecided) onDecided(card);
    } catch (err) {
      delete card.dataset.busy;
      buttons.forEach((b) => (b.disabled = false));
      status.className = "card-status error";
      status.textContent = err.message;
    }
  }

  card.addEventListener("keydown", (event) => {
    if (event.target !== card && event.target.tagName !== "BUTTON") return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const key = event.key;
    const decision =
      key === "a" ? "allow-once" : key === "A" ? "allow-always" : key === "d" ? "deny" : null;
    if (decision) {
      event.preventDefault();
      send(decision);
    } else if (key === "j" || key === "ArrowDown") {
      event.preventDefault();
      move(card, 1);
    } else if (key === "k" || key === "ArrowUp") {
      event.preventDefault();
      move(card, -1);
    }
  });
  return card;
}

function move(card, step) {
  const list = card.parentElement;
  if (!list) return;
  const cards = [...list.querySelectorAll("article.approval:not(.decided)")];
  const index = cards.indexOf(card);
  const next = cards[index + step];
  if (next) next.focus();
}

/** Keep ``list``'s cards in step with ``rows`` (cards are kept, so focus stays put). */
export function reconcile(list, rows, options) {
  const wanted = new Map(rows.map((row) => [row.id, row]));
  const focused = document.activeElement;
  let focusLost = false;
  for (const card of [...list.children]) {
    if (!wanted.has(card.dataset.approvalId)) {
      if (card.contains(focused)) focusLost = true;
      clearInterval(card.timer);
      card.remove();
    }
  }
  const present = new Map([...list.children].map((card) => [card.dataset.approvalId, card]));
  let previous = null;
  for (const row of rows) {
    let card = present.get(row.id);
    if (!card) card = approvalCard(row, options);
    const at = previous ? previous.nextSibling : list.firstChild;
    if (card !== at) list.insertBefore(card, at);
    previous = card;
  }
  return focusLost;
}

/** The approvals view: ``update(snapshot)`` renders the inbox and history. */
export function mountApprovals({ onCount }) {
  const inbox = document.getElementById("inbox");
  const empty = document.getElementById("inbox-empty");
  const history = document.getElementById("history");

  const afterDecision = (card) => {
    const cards = [...inbox.querySelectorAll("article.approval:not(.decided)")];
    const next = cards.find((c) => c !== card);
    if (card.contains(document.activeElement)) {
      if (next) next.focus();
      else document.getElementById("inbox-title").focus();
    }
  };

  return {
    update(snapshot) {
      const pending = snapshot.pending || [];
      const focusLost = reconcile(inbox, pending, { onDecided: afterDecision });
      if (focusLost) {
        const first = inbox.querySelector("article.approval:not(.decided)");
        (first || document.getElementById("inbox-title")).focus();
      }
      empty.hidden = pending.length > 0;
      onCount(pending.length);
      replace(
        history,
        (snapshot.history || []).map((row) =>
          h(
            "tr",
            { dataset: { approvalId: row.id || "" } },
            h("td", { text: when(row.at) }),
            h("td", { text: row.title || "" }),
            h("td", {}, h("code", { text: row.tool_name || "" })),
            h("td", {}, h("code", { text: row.plugin_id || "" })),
            h("td", {}, chip(row.resolution || "", `resolution ${row.resolution || ""}`)),
            h("td", { text: row.by || "" }),
          ),
        ),
      );
    },
  };
}
