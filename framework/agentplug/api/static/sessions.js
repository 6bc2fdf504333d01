// Sessions: the list, one session's transcript and plugin extensions, and reset.

import { api } from "./api.js";
import { transcriptItem } from "./chat.js";
import { chip, h, pretty, replace } from "./dom.js";

function path(key, rest = "") {
  return `/api/sessions/${encodeURIComponent(key)}${rest}`;
}

/** The sessions view. */
export function mountSessions() {
  const list = document.getElementById("sessions");
  const detail = document.getElementById("session-detail");
  let selected = null;

  async function refresh() {
    try {
      const answer = await api("/api/sessions");
      replace(
        list,
        answer.sessions.length
          ? answer.sessions.map((row) =>
              h(
                "li",
                {},
                h(
                  "button",
                  {
                    type: "button",
                    class: `pick-item${row.session_key === selected ? " current" : ""}`,
                    "aria-current": row.session_key === selected ? "true" : null,
                    dataset: { sessionKey: row.session_key },
                    onclick: () => open(row.session_key),
                  },
                  h("code", { text: row.session_key }),
                  " ",
                  h("span", { class: "muted", text: `${row.messages} messages` }),
                ),
              ),
            )
          : h("li", { class: "empty", text: "No session yet." }),
      );
    } catch (err) {
      replace(list, h("li", { class: "error", text: err.message }));
    }
  }

  async function open(key) {
    selected = key;
    refresh();
    let row;
    let transcript = null;
    try {
      row = await api(path(key));
      try {
        transcript = await api(path(key, "/transcript"));
      } catch (err) {
        if (err.status !== 404) throw err;
      }
    } catch (err) {
      replace(detail, h("p", { class: "error", text: err.message }));
      return;
    }
    const status = h("p", { role: "status" });
    const reset = h("button", { type: "button", class: "deny", text: "Reset session" });
    reset.addEventListener("click", async () => {
      if (!reset.dataset.armed) {
        reset.dataset.armed = "1";
        reset.textContent = "Confirm reset";
        status.textContent =
          "Resetting fires before_reset, lets plugins clean up and forgets the transcript. Press again to confirm.";
        return;
      }
      reset.disabled = true;
      try {
        await api(path(key, "/reset"), { method: "POST", body: {} });
        await open(key);
        const again = detail.querySelector("p[role=status]");
        if (again) again.textContent = "The session was reset.";
      } catch (err) {
        reset.disabled = false;
        status.className = "error";
        status.textContent = err.message;
      }
    });
    const messages = transcript ? transcript.messages : [];
    replace(
      detail,
      h("h2", {}, "Session ", h("code", { text: key })),
      h("div", { class: "actions" }, reset),
      status,
      h("h3", { text: "Plugin extensions" }),
      Object.keys(row.plugin_extensions || {}).length
        ? h("pre", { class: "extensions", text: pretty(row.plugin_extensions) })
        : h("p", { class: "empty", text: "No plugin keeps state in this session." }),
      h("h3", {}, "Transcript ", transcript ? chip(`${transcript.total} messages`) : null),
      messages.length
        ? h("ol", { class: "chat-log transcript" }, messages.map(transcriptItem))
        : h("p", { class: "empty", text: "No transcript (no turn ran in this session since it was reset)." }),
    );
  }

  return { show: refresh, open };
}
