// Chat with the agent through the gateway's runner (POST .../messages/stream): the reply
// appears as the server sends it (text deltas when the runner streams, else the whole
// reply at the end); approvals this turn asks for show inline and can be decided there.

import { api, postStream } from "./api.js";
import { reconcile } from "./approvals.js";
import { append, chip, h, pretty, replace } from "./dom.js";

function sessionPath(key, rest = "") {
  return `/api/sessions/${encodeURIComponent(key)}${rest}`;
}

function messageItem(role, text, extra = []) {
  return h(
    "li",
    { class: `message ${role}` },
    h("span", { class: "role", text: role }),
    h("div", { class: "content", text: text || "" }),
    extra,
  );
}

/** A transcript message's tool calls, one line each: ``name {arguments}``. */
export function toolCalls(message) {
  return (message.tool_calls || []).map((call) => {
    const fn = call.function || {};
    let args = fn.arguments || "";
    try {
      args = JSON.stringify(JSON.parse(args));
    } catch (err) {
      /* shown as sent */
    }
    return h("p", { class: "tool-call" }, "calls ", h("code", { text: fn.name || "?" }), " ", h("code", { class: "muted", text: args }));
  });
}

/** One stored transcript message. */
export function transcriptItem(message) {
  const content = typeof message.content === "string" ? message.content : pretty(message.content);
  return messageItem(message.role || "?", content, toolCalls(message));
}

/** The chat view; ``approvals(snapshot)`` shows this turn's pending approvals inline. */
export function mountChat({ openTurn }) {
  const log = document.getElementById("chat-log");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-input");
  const send = document.getElementById("chat-send");
  const keyInput = document.getElementById("chat-key");
  const sessionForm = document.getElementById("chat-session");
  let current = null; // {runId, inline: element}
  let lastSnapshot = { pending: [] };

  const sessionKey = () => keyInput.value.trim() || "ui:operator";

  async function load() {
    replace(log);
    try {
      const transcript = await api(sessionPath(sessionKey(), "/transcript"));
      append(log, transcript.messages.map(transcriptItem));
      if (log.lastElementChild) log.lastElementChild.scrollIntoView({ block: "end" });
    } catch (err) {
      if (err.status !== 404) append(log, messageItem("error", err.message));
    }
  }

  function showInline() {
    if (!current) return;
    const rows = (lastSnapshot.pending || []).filter((row) => row.run_id === current.runId);
    reconcile(current.inline, rows, {});
    if (rows.length) current.inline.scrollIntoView({ block: "nearest" });
  }

  async function submit() {
    const text = input.value;
    if (!text.trim() || send.disabled) return;
    input.value = "";
    send.disabled = true;
    append(log, messageItem("user", text));
    log.lastElementChild.scrollIntoView({ block: "end" });
    const content = h("div", { class: "content pending", text: "\u2026" });
    const inline = h("div", { class: "inline-approvals", role: "list", "aria-label": "Approvals" });
    const footer = h("p", { class: "turn-footer" });
    append(
      log,
      h("li", { class: "message assistant" }, h("span", { class: "role", text: "assistant" }), content, inline, footer),
    );
    let streamed = "";
    try {
      for await (const { event, data } of postStream(sessionPath(sessionKey(), "/messages/stream"), {
        content: text,
        sender_id: "control-room",
      })) {
        if (event === "started") {
          current = { runId: data.run_id, inline };
          showInline();
          footer.scrollIntoView({ block: "end" });
        } else if (event === "delta") {
          streamed += data.text || "";
          content.classList.remove("pending");
          content.textContent = streamed;
        } else if (event === "final") {
          finish(content, footer, data, streamed);
        } else if (event === "error") {
          content.classList.remove("pending");
          content.textContent = "";
          replace(footer, chip("error", "status failed"), " ", data.error || "the turn failed");
        }
      }
    } catch (err) {
      content.classList.remove("pending");
      replace(footer, chip("error", "status failed"), " ", err.message);
    } finally {
      replace(inline);
      current = null;
      send.disabled = false;
      input.focus();
    }
  }

  function finish(content, footer, result, streamed) {
    content.classList.remove("pending");
    if (result.reply !== null && result.reply !== undefined) content.textContent = result.reply;
    else if (!streamed) content.textContent = "";
    const parts = [chip(result.status || "?", `status ${result.status || ""}`)];
    if (result.blocked_by) parts.push(" blocked by ", h("code", { text: result.blocked_by }));
    if (result.error) parts.push(" ", h("span", { class: "error", text: result.error }));
    if (result.run_id) {
      parts.push(
        " ",
        h("a", {
          href: `#/timeline/${encodeURIComponent(result.run_id)}`,
          text: "timeline",
          onclick: () => openTurn(result.run_id),
        }),
      );
    }
    replace(footer, parts);
    footer.scrollIntoView({ block: "nearest" });
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    submit();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      submit();
    }
  });
  sessionForm.addEventListener("submit", (event) => {
    event.preventDefault();
    load();
  });

  return {
    show: load,
    approvals(snapshot) {
      lastSnapshot = snapshot;
      showInline();
    },
  };
}
