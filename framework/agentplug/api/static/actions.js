// Custom actions: list, create, edit, delete and test, through the CRUD endpoints. An
// action is edited as its JSON (the config file's shape); the server validates it and
// says what is wrong.

import { api } from "./api.js";
import { h, pretty, replace } from "./dom.js";

const TEMPLATE = {
  id: "my-action",
  name: "MY_ACTION",
  description: "What it does, for the model",
  parameters: [{ name: "text", description: "the input", required: true }],
  handler: { type: "code", language: "python", code: "return params['text'].upper()" },
  enabled: true,
  sideEffects: false,
};

function path(id, rest = "") {
  return `/api/custom-actions/${encodeURIComponent(id)}${rest}`;
}

/** The custom actions view. */
export function mountActions() {
  const list = document.getElementById("actions");
  const detail = document.getElementById("action-detail");
  document.getElementById("action-new").addEventListener("click", () => edit(null, TEMPLATE));
  let selected = null;
  let asked = 0; // the newest list request; an older one answering late is dropped

  async function refresh() {
    const ask = ++asked;
    try {
      const answer = await api("/api/custom-actions");
      if (ask !== asked) return;
      replace(
        list,
        answer.actions.length
          ? answer.actions.map((action) =>
              h(
                "li",
                {},
                h(
                  "button",
                  {
                    type: "button",
                    class: `pick-item${action.id === selected ? " current" : ""}`,
                    dataset: { actionId: action.id },
                    onclick: () => edit(action.id, action),
                  },
                  h("code", { text: action.name }),
                  action.enabled ? null : h("span", { class: "muted", text: " (disabled)" }),
                ),
              ),
            )
          : h("li", { class: "empty", text: "No custom action yet." }),
        answer.errors.map((e) => h("li", { class: "error", text: `entry ${e.index}: ${e.error}` })),
      );
    } catch (err) {
      if (ask === asked) replace(list, h("li", { class: "error", text: err.message }));
    }
  }

  function edit(id, action, message = "") {
    selected = id;
    refresh();
    const editor = h("textarea", { id: "action-json", rows: "16", spellcheck: "false" });
    editor.value = pretty(action);
    const status = h("p", { role: "status", text: message });
    const save = h("button", { type: "button", text: id ? "Save" : "Create" });
    const remove = id ? h("button", { type: "button", class: "deny", text: "Delete" }) : null;
    const params = h("textarea", { id: "action-params", rows: "4", spellcheck: "false" });
    params.value = pretty(Object.fromEntries((action.parameters || []).map((p) => [p.name, ""])));
    const run = h("button", { type: "button", text: "Test" });
    const output = h("pre", { class: "output", "aria-live": "polite" });

    // One request at a time: a test run while a save is on its way would test the old
    // definition, and the save's answer redraws this pane (its output with it).
    const busy = (on) => {
      for (const button of [save, remove, run]) if (button) button.disabled = on;
    };
    const fail = (err) => {
      busy(false);
      status.className = "error";
      status.textContent = err.message;
    };
    save.addEventListener("click", async () => {
      let body;
      try {
        body = JSON.parse(editor.value);
      } catch (err) {
        fail(new Error(`not JSON: ${err.message}`));
        return;
      }
      busy(true);
      status.className = "";
      status.textContent = id ? "Saving\u2026" : "Creating\u2026";
      try {
        const saved = id
          ? await api(path(id), { method: "PUT", body })
          : await api("/api/custom-actions", { method: "POST", body });
        edit(saved.id || body.id, saved, id ? "Saved and registered." : "Created and registered.");
      } catch (err) {
        fail(err);
      }
    });
    if (remove) {
      remove.addEventListener("click", async () => {
        if (!remove.dataset.armed) {
          remove.dataset.armed = "1";
          remove.textContent = "Confirm delete";
          return;
        }
        busy(true);
        try {
          await api(path(id), { method: "DELETE" });
          selected = null;
          replace(detail, h("p", { class: "empty", text: `Action ${id} was deleted.` }));
          refresh();
        } catch (err) {
          fail(err);
        }
      });
    }
    run.addEventListener("click", async () => {
      let values;
      try {
        values = JSON.parse(params.value || "{}");
      } catch (err) {
        fail(new Error(`parameters are not JSON: ${err.message}`));
        return;
      }
      output.textContent = "running\u2026";
      busy(true);
      try {
        const answer = await api(path(id, "/test"), { method: "POST", body: { params: values } });
        const took = Math.round(Number(answer.duration_ms));
        output.textContent = `${answer.ok ? "ok" : "failed"} in ${took} ms\n${answer.output}`;
      } catch (err) {
        output.textContent = err.message;
      } finally {
        busy(false);
      }
    });
    replace(
      detail,
      h("h2", {}, id ? ["Action ", h("code", { text: id })] : "New action"),
      h("label", { for: "action-json", text: "Definition (JSON)" }),
      editor,
      h("div", { class: "actions" }, save, remove),
      status,
      id
        ? [
            h("h3", { text: "Test" }),
            h("label", { for: "action-params", text: "Parameters (JSON)" }),
            params,
            h("div", { class: "actions" }, run),
            output,
          ]
        : null,
    );
  }

  return { show: refresh };
}
