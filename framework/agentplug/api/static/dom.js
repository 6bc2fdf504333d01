// Building the page safely: every string becomes a text node or an attribute value,
// never markup. Nothing in this page parses HTML (the Content-Security-Policy requires
// Trusted Types, so an HTML sink would throw), which is what keeps a hostile plugin
// title or model reply from running script.

const BLOCKED_ATTRIBUTES = new Set(["style", "srcdoc", "innerhtml", "outerhtml"]);

/** An element: h("button", {class: "x", onclick: fn, "aria-label": "..."}, "text", child). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (BLOCKED_ATTRIBUTES.has(key.toLowerCase()) || key.toLowerCase().startsWith("on")) {
      throw new Error(`attribute ${key} is not set from data`);
    } else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, ...children);
  return el;
}

/** Append children: strings and numbers as text, nodes as they are, arrays flattened. */
export function append(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Remove every child of ``el``. */
export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Replace the children of ``el``. */
export function replace(el, ...children) {
  return append(clear(el), ...children);
}

/** Epoch seconds as a local time (with the date when not today). */
export function when(epoch) {
  if (epoch === null || epoch === undefined) return "";
  const date = new Date(Number(epoch) * 1000);
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  return sameDay ? date.toLocaleTimeString() : date.toLocaleString();
}

/** Milliseconds, short. */
export function ms(value) {
  const n = Number(value || 0);
  if (n > 0 && n < 0.01) return "<0.01 ms";
  if (n >= 10000) return `${(n / 1000).toFixed(1)} s`;
  if (n >= 100) return `${n.toFixed(0)} ms`;
  return `${n.toFixed(n >= 10 ? 1 : 2)} ms`;
}

/** Pretty JSON text (for <pre> blocks). */
export function pretty(value) {
  try {
    return JSON.stringify(value, null, 2);
  } catch (err) {
    return String(value);
  }
}

/** A small status chip. */
export function chip(text, kind = "") {
  return h("span", { class: `chip ${kind}`.trim(), text });
}

/** A message for the person, in ``el`` (role=alert where it is an error). */
export function say(el, text, kind = "error") {
  el.className = kind;
  el.textContent = text || "";
}
