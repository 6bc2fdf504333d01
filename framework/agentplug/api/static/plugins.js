// Plugins and hooks: each loaded plugin with its handlers' effective priority and timeout
// (and where the timeout came from), load errors and overruns; the hook catalogue.

import { api } from "./api.js";
import { chip, h, replace } from "./dom.js";

function pluginCard(row) {
  const title = row.name || row.plugin_id;
  const handlers = row.handlers || [];
  return h(
    "article",
    { class: `plugin-card${row.error ? " failed" : ""}`, dataset: { pluginId: row.plugin_id } },
    h(
      "header",
      {},
      h("h3", { class: "title", text: title }),
      row.name ? h("code", { class: "muted", text: row.plugin_id }) : null,
      " ",
      chip(row.bundled ? "bundled" : "installed"),
      row.error ? chip("load error", "bad") : null,
    ),
    h(
      "p",
      { class: "meta" },
      [row.distribution, row.version].filter(Boolean).join(" ") || "no distribution",
      row.source ? [" \u00b7 ", h("code", { text: row.source })] : null,
    ),
    row.description ? h("p", { class: "description", text: row.description }) : null,
    row.error ? h("p", { class: "error", role: "note", text: row.error }) : null,
    handlers.length
      ? h(
          "table",
          { class: "grid compact" },
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              ["Hook", "Priority", "Timeout", "Timeout from", "Gate"].map((t) => h("th", { scope: "col", text: t })),
            ),
          ),
          h(
            "tbody",
            {},
            handlers.map((handler) =>
              h(
                "tr",
                {},
                h("td", {}, h("code", { text: handler.hook })),
                h("td", { class: "num", text: handler.priority }),
                h("td", { class: "num", text: handler.timeout_ms === null ? "none" : `${handler.timeout_ms} ms` }),
                h("td", { text: handler.timeout_source || "" }),
                h("td", {}, handler.gate ? chip(`refused: ${handler.gate}`, "bad") : ""),
              ),
            ),
          ),
        )
      : null,
    (row.warnings || []).length
      ? h("ul", { class: "warnings" }, row.warnings.map((w) => h("li", { text: w })))
      : null,
  );
}

function hookRow(hook) {
  const notes = [];
  if (hook.deprecated) notes.push(chip(`deprecated${hook.replacement ? `: use ${hook.replacement}` : ""}`, "warn"));
  if (hook.conversation_gate) notes.push(chip("conversation gate"));
  if (hook.prompt_gate) notes.push(chip("prompt gate"));
  return h(
    "tr",
    { dataset: { hook: hook.name } },
    h("td", {}, h("code", { text: hook.name })),
    h("td", { text: hook.group || "" }),
    h("td", { text: hook.kind }),
    h("td", { class: "reduction", text: hook.reduction }),
    h("td", { class: "num", text: hook.default_timeout_ms ? `${hook.default_timeout_ms} ms` : "\u2014" }),
    h("td", { text: hook.failure }),
    h("td", {}, notes),
  );
}

/** The plugins view (loaded on show). */
export function mountPlugins() {
  const plugins = document.getElementById("plugins");
  const hooks = document.getElementById("hooks");
  const filter = document.getElementById("hook-filter");
  let catalogue = [];

  function renderHooks() {
    const needle = filter.value.trim().toLowerCase();
    const rows = catalogue.filter(
      (hook) => !needle || `${hook.name} ${hook.group} ${hook.kind} ${hook.reduction}`.toLowerCase().includes(needle),
    );
    replace(hooks, rows.map(hookRow));
  }

  filter.addEventListener("input", renderHooks);

  return {
    async show() {
      try {
        const [loaded, declared] = await Promise.all([api("/api/plugins"), api("/api/hooks")]);
        replace(
          plugins,
          loaded.plugins.length
            ? loaded.plugins.map(pluginCard)
            : h("p", { class: "empty", text: "No plugin is loaded." }),
        );
        catalogue = declared.hooks;
        renderHooks();
      } catch (err) {
        replace(plugins, h("p", { class: "error", text: err.message }));
      }
    },
  };
}
