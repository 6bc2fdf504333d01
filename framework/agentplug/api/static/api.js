// Talking to the control API: JSON requests with the login cookie, server-sent events.

/** An API answer that was not 2xx: ``status`` and the server's one-line ``message``. */
export class ApiError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/** Dispatched on ``window`` when the server says the login is gone (401). */
export const LOGGED_OUT = "agentplug:logged-out";

function loggedOut() {
  window.dispatchEvent(new CustomEvent(LOGGED_OUT));
}

async function failure(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (err) {
    body = null;
  }
  const message = (body && body.error) || `${response.status} ${response.statusText}`;
  if (response.status === 401) loggedOut();
  return new ApiError(response.status, message, body);
}

/** ``fetch`` a JSON endpoint of this server; the parsed answer, or an ``ApiError``. */
export async function api(path, { method = "GET", body } = {}) {
  const options = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  if (!response.ok) throw await failure(response);
  return response.status === 204 ? null : response.json();
}

/** Parse a server-sent event stream (a fetch body): yields ``{event, data}``. */
export async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      }
      if (data.length) yield { event: name, data: JSON.parse(data.join("\n")) };
    }
  }
}

/** POST a JSON body and read the answer as server-sent events. */
export async function* postStream(path, body) {
  const response = await fetch(path, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await failure(response);
  yield* events(response);
}

/**
 * The live feed (``GET /api/events``): calls ``handlers[eventName](data)`` and
 * ``onState("live" | "reconnecting")``. The browser reconnects by itself; a lost login
 * ends the feed. Returns a function that closes it.
 */
export function feed(handlers, onState) {
  let source = null;
  let closed = false;
  const open = () => {
    source = new EventSource("/api/events");
    source.addEventListener("open", () => onState("live"));
    for (const [name, handler] of Object.entries(handlers)) {
      source.addEventListener(name, (message) => handler(JSON.parse(message.data)));
    }
    source.addEventListener("error", async () => {
      if (closed) return;
      onState("reconnecting");
      if (source.readyState === EventSource.CLOSED) {
        // The server refused the stream (a lost login, too many streams): ask why.
        try {
          await api("/api/ui/session");
          setTimeout(() => !closed && open(), 2000);
        } catch (err) {
          /* a 401 already said "logged out" */
        }
      }
    });
  };
  open();
  return () => {
    closed = true;
    if (source) source.close();
  };
}
