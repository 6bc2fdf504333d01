// The control room: login, the sections (hash routes), and the live feed that keeps the
// approvals inbox, the chat's inline approvals and the timeline current.

import { LOGGED_OUT, api, feed } from "./api.js";
import { mountActions } from "./actions.js";
import { mountApprovals } from "./approvals.js";
import { mountChat } from "./chat.js";
import { mountPlugins } from "./plugins.js";
import { mountSessions } from "./sessions.js";
import { mountTimeline } from "./timeline.js";

const VIEWS = ["approvals", "chat", "timeline", "plugins", "sessions", "actions"];
const $ = (id) => document.getElementById(id);

let closeFeed = null;
let views = null;

function setLive(state) {
  $("live").textContent = state === "live" ? "live" : "reconnecting\u2026";
  $("live").dataset.state = state;
}

function setCount(count) {
  $("pending-count").textContent = count ? String(count) : "";
  document.title = `${count ? `(${count}) ` : ""}agentplug control room`;
}

function route() {
  if (!views) return;
  const [name, arg] = (location.hash.replace(/^#\/?/, "") || "approvals").split("/");
  const view = VIEWS.includes(name) ? name : "approvals";
  for (const other of VIEWS) $(`view-${other}`).hidden = other !== view;
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.view === view) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  const mounted = views[view];
  if (mounted.show) mounted.show();
  if (view === "timeline") mounted.open(arg ? decodeURIComponent(arg) : null);
  else if (view === "sessions" && arg) mounted.open(decodeURIComponent(arg));
}

function showApp() {
  $("login").hidden = true;
  $("nav").hidden = false;
  $("logout").hidden = false;
  if (!views) {
    views = {
      approvals: mountApprovals({ onCount: setCount }),
      chat: null,
      timeline: mountTimeline(),
      plugins: mountPlugins(),
      sessions: mountSessions(),
      actions: mountActions(),
    };
    views.chat = mountChat({ openTurn: (runId) => views.timeline.open(runId) });
  }
  if (closeFeed) closeFeed();
  closeFeed = feed(
    {
      approvals: (snapshot) => {
        views.approvals.update(snapshot);
        views.chat.approvals(snapshot);
      },
      turn_started: (row) => views.timeline.turn("turn_started", row),
      turn_ended: (row) => views.timeline.turn("turn_ended", row),
    },
    setLive,
  );
  route();
}

function showLogin(message) {
  if (closeFeed) closeFeed();
  closeFeed = null;
  for (const name of VIEWS) $(`view-${name}`).hidden = true;
  $("nav").hidden = true;
  $("logout").hidden = true;
  $("live").textContent = "";
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("token").focus();
}

async function logIn(event) {
  event.preventDefault();
  const token = $("token").value;
  $("token").value = "";
  try {
    await api("/api/ui/login", { method: "POST", body: { token } });
    showApp();
    $("main").focus();
  } catch (err) {
    $("login-error").textContent = err.message;
    $("token").focus();
  }
}

async function logOut() {
  try {
    await api("/api/ui/logout", { method: "POST", body: {} });
  } finally {
    showLogin("You are logged out.");
  }
}

async function start() {
  $("login-form").addEventListener("submit", logIn);
  $("logout").addEventListener("click", logOut);
  window.addEventListener("hashchange", route);
  window.addEventListener(LOGGED_OUT, () => showLogin("Your login ended; paste the token again."));
  try {
    await api("/api/ui/session");
    showApp();
  } catch (err) {
    if (err.status === 401) showLogin("");
    else showLogin(err.message);
  }
}

start();
