// TheFold's console: a small single-page application over the REST API (/v1).
//
// Safety rules this file keeps: every string from the API or the user goes into the page
// as text (textContent, attribute values through setAttribute), never as HTML; a link's
// href is only ever a path of the console or an http(s) URL; the access token lives in
// memory only (the session cookie, which a script cannot read, brings a new one on load).

const session = { token: "", expires: 0, user: null, timer: 0 };

const STATUSES = ["BACKLOG", "PLANNED", "IN_PROGRESS", "IN_REVIEW", "DONE", "BLOCKED", "CANCELLED"];

// h makes an element: h("a", {href: "/x", class: "c"}, "text", child…). Strings become text.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "href") el.setAttribute("href", safeHref(v));
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// svgEl makes an SVG element, as h makes an HTML one (strings become text).
function svgEl(tag, attrs, ...kids) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const k of kids.flat(Infinity)) if (k !== null && k !== undefined) el.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return el;
}

// fill replaces el's children with nodes (nested lists flattened, null and false left out,
// strings as text).
function fill(el, ...nodes) {
  el.replaceChildren(...nodes.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false)
    .map((c) => (c instanceof Node ? c : document.createTextNode(String(c)))));
}

// safeHref keeps console paths and http(s) URLs; anything else (javascript:, data:…) is "#".
function safeHref(v) {
  const s = String(v);
  if (s.startsWith("/") && !s.startsWith("//")) return s;
  try {
    const u = new URL(s);
    if (u.protocol === "https:" || u.protocol === "http:") return u.href;
  } catch (_) { /* not a URL */ }
  return "#";
}

function notice(text, kind) {
  const n = document.getElementById("notice");
  fill(n);
  if (text) n.append(h("p", { class: "notice " + (kind || "info") }, text));
}

function show(...nodes) {
  const main = document.getElementById("main");
  fill(main, ...nodes);
}

// ApiError carries the API's one error shape.
class ApiError extends Error {
  constructor(status, body) {
    super((body && body.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }
}

async function request(method, path, body, extra) {
  const headers = { Accept: "application/json", ...(extra || {}) };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch (_) { data = { message: text }; }
  }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

// api calls the REST API with the session's access token, refreshing it once on a 401.
async function api(method, path, body) {
  const call = () => request(method, path, body, session.token ? { Authorization: "Bearer " + session.token } : {});
  try {
    return await call();
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 401) throw e;
    if (!(await refresh())) {
      signedOut("Your session ended. Sign in again.");
      throw e;
    }
    return call();
  }
}

function consoleSession(path, body) {
  return request("POST", "/console/session" + path, body, {
    "X-TheFold-Console": "1",
    ...(session.token ? { Authorization: "Bearer " + session.token } : {}),
  });
}

function adopt(s) {
  session.token = s.access_token;
  session.expires = Date.parse(s.access_expire_time) || 0;
  clearTimeout(session.timer);
  // A minute before the access token expires (at least in 10 s), the cookie buys the next.
  const wait = Math.max(session.expires - Date.now() - 60000, 10000);
  session.timer = setTimeout(() => refresh().then((ok) => { if (!ok) signedOut("Your session ended. Sign in again."); }), wait);
}

async function refresh() {
  try {
    adopt(await consoleSession("/refresh"));
    if (!session.user) session.user = await whoami();
    header();
    return true;
  } catch (_) {
    return false;
  }
}

async function whoami() {
  const me = await request("GET", "/v1/auth/whoami", undefined, { Authorization: "Bearer " + session.token });
  try {
    const u = await request("GET", "/v1/users/" + encodeURIComponent(me.user_id), undefined, { Authorization: "Bearer " + session.token });
    return u.user || { id: me.user_id };
  } catch (_) {
    return { id: me.user_id };
  }
}

function header() {
  const signedIn = !!session.token;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("signout").hidden = !signedIn;
  document.getElementById("who").textContent = signedIn && session.user ? (session.user.email || session.user.id || "") : "";
}

function signedOut(message) {
  session.token = "";
  session.user = null;
  clearTimeout(session.timer);
  header();
  navigate("/signin", message ? { notice: message } : undefined, true);
}

// --- routing ---

const routes = [
  [/^\/signin$/, signinPage],
  [/^\/(tasks)?$/, tasksPage],
  [/^\/tasks\/([^/]+)$/, taskPage],
  [/^\/jobs\/([^/]+)$/, jobPage],
  [/^\/reviews\/([^/]+)$/, reviewPage],
  [/^\/projects$/, projectsPage],
  [/^\/projects\/([^/]+)$/, projectPage],
  [/^\/memory$/, memoryPage],
  [/^\/repos$/, reposPage],
  [/^\/settings$/, settingsPage],
  [/^\/usage$/, usagePage],
  [/^\/skills$/, skillsPage],
  [/^\/chat$/, chatListPage],
  [/^\/chat\/([^/]+)$/, chatPage],
];

// page is the current page's lifetime: its streams and timers stop when another page renders.
let page = new AbortController();

function navigate(path, state, replace) {
  if (replace) history.replaceState(state || null, "", path);
  else history.pushState(state || null, "", path);
  render();
}

async function render() {
  page.abort();
  page = new AbortController();
  const path = location.pathname;
  const state = history.state || {};
  notice(state.notice || "", state.kind || "info");
  if (!session.token && path !== "/signin") {
    navigate("/signin", { next: path + location.search }, true);
    return;
  }
  for (const [re, page] of routes) {
    const m = path.match(re);
    if (m) {
      try {
        await page(...m.slice(1));
      } catch (e) {
        show(h("h1", {}, "Something went wrong"), h("p", { class: "error" }, e.message),
          h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "Back to the tasks")));
      }
      document.getElementById("main").focus({ preventScroll: true });
      return;
    }
  }
  show(h("h1", {}, "Not found"), h("p", {}, "No page here. ", h("a", { href: "/tasks", "data-nav": true }, "Go to the tasks")));
}

document.addEventListener("click", (e) => {
  const a = e.target.closest("a[data-nav]");
  if (!a || e.metaKey || e.ctrlKey || e.shiftKey || e.button !== 0) return;
  e.preventDefault();
  navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", render);

// --- pages ---

function field(label, input) {
  return h("label", { class: "field" }, h("span", {}, label), input);
}

function signinPage() {
  const next = (history.state && history.state.next) || "/tasks";
  const email = h("input", { type: "email", name: "email", required: true, autocomplete: "email" });
  const code = h("input", { type: "text", name: "code", inputmode: "numeric", autocomplete: "one-time-code", pattern: "[0-9]{6}", required: true });
  const error = h("p", { class: "error", role: "alert" });
  const codeForm = h("form", { class: "card", id: "signin-code", hidden: true, onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      const s = await consoleSession("", { email: email.value.trim(), code: code.value.trim() });
      adopt(s);
      session.user = s.user || null;
      header();
      navigate(next.startsWith("/") && next !== "/signin" ? next : "/tasks", null, true);
    } catch (err) {
      error.textContent = err.message;
      code.select();
    }
  } }, field("Code from the e-mail", code), h("button", { type: "submit" }, "Sign in"));
  const emailForm = h("form", { class: "card", id: "signin-email", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      await request("POST", "/v1/auth/login-code", { email: email.value.trim() });
      codeForm.hidden = false;
      notice("If the address is known, a 6-digit code is on its way to it.");
      code.focus();
    } catch (err) {
      error.textContent = err.message;
    }
  } }, field("E-mail address", email), h("button", { type: "submit" }, "Send me a code"));
  show(h("h1", {}, "Sign in"), emailForm, codeForm, error);
  email.focus();
}

function statusName(s) {
  return String(s || "").replace(/^TASK_STATUS_/, "").replaceAll("_", " ").toLowerCase();
}

async function tasksPage() {
  const params = new URLSearchParams(location.search);
  const repo = h("input", { type: "text", name: "repo", value: params.get("repo") || "", placeholder: "owner/name" });
  const status = h("select", { name: "status" }, h("option", { value: "" }, "any"),
    STATUSES.map((s) => h("option", { value: "TASK_STATUS_" + s, selected: params.get("status") === "TASK_STATUS_" + s }, statusName(s))));
  const filters = h("form", { class: "filters", role: "search", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (repo.value.trim()) q.set("repo", repo.value.trim());
    if (status.value) q.set("status", status.value);
    navigate("/tasks" + (q.toString() ? "?" + q : ""));
  } }, field("Repository", repo), field("Status", status), h("button", { type: "submit" }, "Filter"));

  const title = h("input", { type: "text", name: "title", required: true, maxlength: 500 });
  const newRepo = h("input", { type: "text", name: "repo", required: true, placeholder: "owner/name", value: params.get("repo") || "" });
  const description = h("textarea", { name: "description", rows: 3 });
  const createError = h("p", { class: "error", role: "alert" });
  // One id per form: a second submit of the same form (a double click, a retry after a lost
  // answer) returns the task the first made instead of making another.
  // An answered error made nothing: the next submit (edited, perhaps) is a new request.
  let requestID = "console-" + crypto.randomUUID();
  const create = h("form", { class: "card", id: "new-task", onsubmit: async (e) => {
    e.preventDefault();
    createError.textContent = "";
    try {
      const r = await api("POST", "/v1/tasks", { request_id: requestID, title: title.value, repo: newRepo.value.trim(), description: description.value });
      navigate("/tasks/" + encodeURIComponent(r.task.id), { notice: "Task created." });
    } catch (err) {
      if (err instanceof ApiError) requestID = "console-" + crypto.randomUUID();
      createError.textContent = err.message;
    }
  } }, h("h2", {}, "New task"), field("Title", title), field("Repository", newRepo), field("Description", description),
  h("button", { type: "submit" }, "Create task"), createError);

  const q = new URLSearchParams();
  if (params.get("repo")) q.set("repo", params.get("repo"));
  if (params.get("status")) q.set("statuses", params.get("status"));
  q.set("page_size", "100");
  const list = await api("GET", "/v1/tasks?" + q);
  const tasks = (list && list.tasks) || [];
  const graphView = params.get("view") === "graph";
  const viewLink = (graph) => {
    const v = new URLSearchParams(params);
    if (graph) v.set("view", "graph"); else v.delete("view");
    return "/tasks?" + v;
  };
  const views = h("p", { class: "views" }, graphView
    ? ["Graph · ", h("a", { href: viewLink(false), "data-nav": true, id: "view-list" }, "List")]
    : [h("a", { href: viewLink(true), "data-nav": true, id: "view-graph" }, "Dependency graph"), " · List"]);
  if (graphView) {
    show(h("h1", {}, "Tasks"), filters, views, tasks.length ? taskGraph(tasks) : h("p", { class: "empty" }, "No tasks to draw."), create);
    return;
  }
  const table = tasks.length === 0
    ? h("p", { class: "empty" }, "No tasks match. Create one below, or import a repository's issues with `thefold tasks import`.")
    : h("table", { class: "tasks" },
      h("caption", {}, `${tasks.length} task${tasks.length === 1 ? "" : "s"}`),
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Title"), h("th", { scope: "col" }, "Repository"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Updated"))),
      h("tbody", {}, tasks.map((t) => h("tr", {},
        h("td", {}, h("a", { href: "/tasks/" + encodeURIComponent(t.id), "data-nav": true, class: "task-title" }, t.title)),
        h("td", {}, t.repo || ""),
        h("td", {}, h("span", { class: "status " + statusName(t.status).replaceAll(" ", "-") }, statusName(t.status))),
        h("td", {}, t.update_time ? new Date(t.update_time).toLocaleString() : "")))));
  show(h("h1", {}, "Tasks"), filters, views, table, create);
}

// taskGraph draws tasks as an SVG graph: a column per depth of blocked-by links (a task
// stands right of everything blocking it), an arrow from each blocker to what it blocks,
// each node coloured by status and a link to the task's page.
function taskGraph(tasks) {
  const svg = svgEl;
  const byID = new Map(tasks.map((t) => [t.id, t]));
  const depth = new Map();
  const depthOf = (t, seen) => {
    if (depth.has(t.id)) return depth.get(t.id);
    if (seen.has(t.id)) return 0; // a cycle: the API refuses them, but never loop
    seen.add(t.id);
    const d = Math.max(-1, ...(t.blocked_by || []).filter((b) => byID.has(b)).map((b) => depthOf(byID.get(b), seen))) + 1;
    depth.set(t.id, d);
    return d;
  };
  tasks.forEach((t) => depthOf(t, new Set()));
  const columns = [];
  for (const t of tasks) (columns[depth.get(t.id)] ||= []).push(t);
  const W = 220, H = 48, GX = 70, GY = 18, PAD = 10;
  const pos = new Map();
  columns.forEach((col, ci) => col.forEach((t, ri) => pos.set(t.id, { x: PAD + ci * (W + GX), y: PAD + ri * (H + GY) })));
  const width = PAD * 2 + columns.length * (W + GX) - GX;
  const height = PAD * 2 + Math.max(...columns.map((c) => c.length)) * (H + GY) - GY + GY * 2;
  const edges = [];
  for (const t of tasks) {
    for (const b of t.blocked_by || []) {
      if (!pos.has(b)) continue;
      const from = pos.get(b), to = pos.get(t.id);
      const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x, y2 = to.y + H / 2;
      // An edge that skips columns bends below the nodes between, so none hides it.
      const skip = x2 - x1 > GX + 1;
      const d = skip
        ? `M${from.x + W / 2},${from.y + H} C${from.x + W / 2},${from.y + H + GY * 2} ${to.x + W / 2},${to.y + H + GY * 2} ${to.x + W / 2},${to.y + H + 4}`
        : `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2 - 4},${y2}`;
      edges.push(svg("path", { class: "edge", d, "marker-end": "url(#arrow)", "data-from": b, "data-to": t.id }));
    }
  }
  const nodes = tasks.map((t) => {
    const p = pos.get(t.id);
    const status = statusName(t.status).replaceAll(" ", "-");
    const title = t.title.length > 30 ? t.title.slice(0, 29) + "…" : t.title;
    return svg("a", { href: "/tasks/" + encodeURIComponent(t.id), "data-nav": "", class: "node " + status, "data-task": t.id },
      svg("title", {}, `${t.title} — ${statusName(t.status)}`),
      svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 8 }),
      svg("text", { x: p.x + 10, y: p.y + 20 }, title),
      svg("text", { x: p.x + 10, y: p.y + 38, class: "sub" }, statusName(t.status)));
  });
  return h("div", { class: "graph", id: "task-graph" },
    svg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": `Dependency graph of ${tasks.length} tasks` },
      svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrow" }))),
      edges, nodes));
}

async function taskPage(id) {
  const r = await api("GET", "/v1/tasks/" + encodeURIComponent(decodeURIComponent(id)));
  const t = r.task;
  const rows = [
    ["Repository", t.repo],
    ["Status", statusName(t.status) + (t.status_reason ? ` — ${t.status_reason}` : "")],
    ["Source", String(t.source || "").replace(/^TASK_SOURCE_/, "").toLowerCase()],
    ["Labels", (t.labels || []).join(", ")],
    ["Blocked by", (t.blocked_by || []).join(", ")],
    ["Created", t.create_time ? new Date(t.create_time).toLocaleString() : ""],
  ].filter(([, v]) => v);
  const pr = t.pull_request && t.pull_request.url
    ? h("p", {}, "Pull request: ", h("a", { href: t.pull_request.url, rel: "noopener noreferrer" }, t.pull_request.url))
    : null;
  const startError = h("p", { class: "error", role: "alert" });
  const start = h("button", { type: "button", id: "start-task", onclick: async () => {
    start.disabled = true;
    startError.textContent = "";
    try {
      const j = await api("POST", "/v1/jobs", { task_id: t.id, request_id: "console-" + crypto.randomUUID() });
      navigate("/jobs/" + encodeURIComponent(j.job.id), { notice: "Job started." });
    } catch (err) {
      startError.textContent = err.message;
      start.disabled = false;
    }
  } }, t.job_id ? "Start again" : "Start");
  show(
    h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "← Tasks")),
    h("h1", { class: "task-title" }, t.title),
    h("div", { class: "actions" }, start,
      t.job_id ? h("a", { href: "/jobs/" + encodeURIComponent(t.job_id), "data-nav": true, id: "task-job" }, "The task's job") : null),
    startError,
    h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    pr,
    h("h2", {}, "Description"),
    t.description ? h("pre", { class: "description" }, t.description) : h("p", { class: "empty" }, "No description."),
  );
}

// --- live streams ---

// follow reads a Watch route as server-sent events through fetch (so the bearer token goes
// in a header, never in a URL), calling onEvent for every event in order. When the
// connection drops it reconnects with the last id it saw as Last-Event-ID, and skips any
// event it already had: no gap, no duplicate. It ends on the stream's `end` event or when
// signal aborts (the page changed).
async function follow(path, onEvent, signal) {
  let last = 0;
  let delay = 500;
  while (!signal.aborted) {
    try {
      const headers = { Accept: "text/event-stream", Authorization: "Bearer " + session.token };
      if (last) headers["Last-Event-ID"] = String(last);
      const resp = await fetch(path, { headers, signal, cache: "no-store" });
      if (resp.status === 401) {
        if (!(await refresh())) { signedOut("Your session ended. Sign in again."); return; }
        continue;
      }
      if (!resp.ok) {
        let body = null;
        try { body = await resp.json(); } catch (_) { /* not JSON */ }
        throw new ApiError(resp.status, body);
      }
      delay = 500;
      onEvent({ event: "open" });
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value.replaceAll("\r\n", "\n");
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const ev = parseEvent(buf.slice(0, i));
          buf = buf.slice(i + 2);
          if (ev.id) {
            const id = Number(ev.id);
            if (id && id <= last) continue; // seen before a reconnection
            if (id) last = id;
          }
          if (ev.event === "end") { onEvent(ev); return; }
          if (ev.event === "heartbeat" || !ev.event) continue;
          onEvent(ev);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 429) {
        onEvent({ event: "failure", data: { message: e.message } });
        return;
      }
    }
    onEvent({ event: "reconnecting" });
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 5000);
  }
}

// streamState shows a followed stream's own events (open, reconnecting, end, gap, failure)
// in live, calling onEnd at the end; it reports whether ev was one of them.
function streamState(ev, live, what, onEnd) {
  switch (ev.event) {
    case "open": live.textContent = "Live"; return true;
    case "reconnecting": live.textContent = "Reconnecting…"; return true;
    case "end": live.textContent = `The ${what} has finished.`; onEnd(); return true;
    case "gap": live.textContent = "Some older events were removed by retention."; return true;
    case "failure": live.textContent = "The stream failed: " + ((ev.data && ev.data.message) || "") + " — reconnecting"; return true;
    default: return false;
  }
}

// debounce calls fn once, ms after the last of a burst of calls.
function debounce(fn, ms) {
  let timer = 0;
  return () => { clearTimeout(timer); timer = setTimeout(fn, ms); };
}

function parseEvent(block) {
  const ev = { event: "", id: "", data: "" };
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const c = line.indexOf(":");
    const k = c < 0 ? line : line.slice(0, c);
    let v = c < 0 ? "" : line.slice(c + 1);
    if (v.startsWith(" ")) v = v.slice(1);
    if (k === "event") ev.event = v;
    else if (k === "id") ev.id = v;
    else if (k === "data") data.push(v);
  }
  ev.data = data.join("\n");
  try { ev.data = ev.data ? JSON.parse(ev.data) : {}; } catch (_) { /* keep the text */ }
  return ev;
}

// --- jobs ---

function enumName(v, prefix) {
  return String(v || "").replace(prefix, "").replaceAll("_", " ").toLowerCase();
}

function money(micros) {
  return "$" + (Number(micros || 0) / 1e6).toFixed(4);
}

// eventText is one line of a job's timeline: what happened, from the event's payload.
function eventText(type, d) {
  switch (type) {
    case "JOB_EVENT_TYPE_CREATED": return "Job created";
    case "JOB_EVENT_TYPE_STATUS_CHANGED": {
      const c = d.status_change || {};
      return "Status: " + enumName(c.status, "JOB_STATUS_") + (c.reason ? ` — ${c.reason}` : "");
    }
    case "JOB_EVENT_TYPE_PHASE_CHANGED": {
      const c = d.phase_changed || {};
      return "Phase: " + enumName(c.phase, "JOB_PHASE_") + (c.attempt > 1 ? ` (attempt ${c.attempt})` : "");
    }
    case "JOB_EVENT_TYPE_PROGRESS": {
      const p = d.progress || {};
      const step = p.total_steps ? ` step ${p.current_step || 0}/${p.total_steps}` : "";
      const fix = p.fix_round ? ` — fix round ${p.fix_round}${p.fix_passed ? " passed" : ""}` : "";
      return "Build" + step + (p.file_path ? ": " + p.file_path : "") + fix;
    }
    case "JOB_EVENT_TYPE_THOUGHT": return (d.thought && d.thought.text) || "Thinking";
    case "JOB_EVENT_TYPE_CLARIFICATION_REQUESTED": return "Question: " + ((d.clarification_requested || {}).question || "");
    case "JOB_EVENT_TYPE_PLAN_CREATED": return "Plan made";
    case "JOB_EVENT_TYPE_PLAN_REVISED": return "Plan revised";
    case "JOB_EVENT_TYPE_DIAGNOSED": {
      const g = d.diagnosis || {};
      return "Diagnosis: " + [enumName(g.category, "DIAGNOSIS_CATEGORY_"), g.reason || "", g.recovery || ""].filter(Boolean).join(" — ");
    }
    case "JOB_EVENT_TYPE_INTERVENED": return "Intervention";
    case "JOB_EVENT_TYPE_REVIEW_SUBMITTED": return "Ready for review";
    case "JOB_EVENT_TYPE_PULL_REQUEST_OPENED": return "Pull request opened" + (d.pull_request && d.pull_request.url ? ": " + d.pull_request.url : "");
    case "JOB_EVENT_TYPE_BUDGET_EXHAUSTED": return "Budget exhausted";
    default: return enumName(type, "JOB_EVENT_TYPE_") || "Event";
  }
}

const ACTIVE = ["JOB_STATUS_QUEUED", "JOB_STATUS_RUNNING", "JOB_STATUS_WAITING_CLARIFICATION", "JOB_STATUS_PAUSED"];

async function jobPage(rawID) {
  const id = decodeURIComponent(rawID);
  const facts = h("div", { id: "job-facts" });
  const live = h("p", { class: "muted", id: "job-live" }, "Connecting…");
  const timeline = h("ol", { class: "timeline", id: "job-events", "aria-label": "What the job did" });
  const actionError = h("p", { class: "error", role: "alert" });
  let job = null;

  const act = (label, path, body, confirmText) => h("button", { type: "button", "data-action": label.toLowerCase(), onclick: async (e) => {
    if (confirmText && !window.confirm(confirmText)) return;
    e.target.disabled = true;
    actionError.textContent = "";
    try { await api("POST", `/v1/jobs/${encodeURIComponent(id)}:${path}`, body || {}); await load(); } catch (err) { actionError.textContent = err.message; e.target.disabled = false; }
  } }, label);

  const draw = () => {
    const j = job;
    const usage = j.usage || {};
    const rows = [
      ["Status", enumName(j.status, "JOB_STATUS_") + (j.status_reason ? ` — ${j.status_reason}` : "")],
      ["Phase", enumName(j.phase, "JOB_PHASE_") + (j.attempt ? ` (attempt ${j.attempt})` : "")],
      ["Repository", j.repo + (j.branch ? ` · ${j.branch}` : "")],
      ["Model", j.model || ""],
      ["Tokens", usage.input_tokens || usage.output_tokens ? `${usage.input_tokens || 0} in, ${usage.output_tokens || 0} out` : ""],
      ["Cost", usage.cost_micros ? money(usage.cost_micros) : ""],
      ["Error", j.error || ""],
    ].filter(([, v]) => v);
    const actions = [];
    if (j.status === "JOB_STATUS_RUNNING" || j.status === "JOB_STATUS_QUEUED") actions.push(act("Pause", "pause"));
    if (j.status === "JOB_STATUS_PAUSED") actions.push(act("Resume", "resume"));
    if (ACTIVE.includes(j.status) || j.status === "JOB_STATUS_HUMAN_NEEDED") actions.push(act("Cancel", "cancel", {}, "Cancel this job?"));
    let clarify = null;
    if (j.status === "JOB_STATUS_WAITING_CLARIFICATION" && j.clarification_question) {
      const answer = h("textarea", { name: "answer", rows: 3, required: true });
      clarify = h("form", { class: "card", id: "clarify", onsubmit: async (e) => {
        e.preventDefault();
        try { await api("POST", `/v1/jobs/${encodeURIComponent(id)}:respondToClarification`, { answer: answer.value }); await load(); } catch (err) { actionError.textContent = err.message; }
      } }, h("p", {}, "The job asks: ", h("strong", {}, j.clarification_question)), field("Your answer", answer), h("button", { type: "submit" }, "Answer"));
    }
    const plan = j.plan && (j.plan.steps || []).length
      ? h("details", { class: "plan" }, h("summary", {}, `Plan: ${j.plan.steps.length} steps`), j.plan.summary ? h("p", {}, j.plan.summary) : null,
        h("ol", {}, j.plan.steps.map((st) => h("li", {}, [enumName(st.action, "FILE_ACTION_"), st.path, (st.command || []).join(" ")].filter(Boolean).join(" ")))))
      : null;
    fill(facts, 
      h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", k === "Status" ? { id: "job-status" } : {}, v)])),
      h("div", { class: "actions" }, actions,
        j.review_id ? h("a", { href: "/reviews/" + encodeURIComponent(j.review_id), "data-nav": true, id: "job-review" }, "Open the review") : null,
        j.pull_request && j.pull_request.url ? h("a", { href: j.pull_request.url, class: "pr-link", rel: "noopener noreferrer" }, `Pull request #${j.pull_request.number || ""}`) : null,
        j.task_id ? h("a", { href: "/tasks/" + encodeURIComponent(j.task_id), "data-nav": true }, "The task") : null),
      clarify, plan);
  };
  const load = async () => { job = (await api("GET", "/v1/jobs/" + encodeURIComponent(id))).job; draw(); };
  await load();
  show(h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "← Tasks")), h("h1", {}, "Job"), facts, actionError,
    h("h2", {}, "Timeline"), live, timeline);

  const reload = debounce(() => load().catch(() => {}), 150);
  const signal = page.signal;
  follow(`/v1/jobs/${encodeURIComponent(id)}:watch?after_id=0`, (ev) => {
    if (streamState(ev, live, "job", reload)) return;
    const time = ev.data.time ? new Date(ev.data.time) : null;
    timeline.append(h("li", { "data-id": ev.id, "data-type": ev.event },
      time ? h("time", { datetime: time.toISOString() }, time.toLocaleTimeString()) : null, " ", eventText(ev.event, ev.data)));
    reload();
  }, signal);
}

// --- reviews ---

function diffView(text) {
  const pre = h("pre", { class: "diff" });
  for (const line of String(text || "").split("\n")) {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "meta" : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
    pre.append(h("span", cls ? { class: cls } : {}, line), "\n");
  }
  return pre;
}

async function reviewPage(rawID) {
  const id = decodeURIComponent(rawID);
  const body = h("div", { id: "review" });
  const result = h("div", { id: "review-result", role: "status" });
  const error = h("p", { class: "error", role: "alert" });
  let review = null;
  let job = null;

  const decide = async (verb, payload) => {
    error.textContent = "";
    try {
      review = (await api("POST", `/v1/reviews/${encodeURIComponent(id)}:${verb}`, payload)).review;
      draw();
      watchForPR();
    } catch (err) {
      error.textContent = err.message;
    }
  };
  const draw = () => {
    const r = review;
    const stats = r.stats || {};
    const decided = r.status !== "REVIEW_STATUS_PENDING";
    const note = h("textarea", { name: "note", rows: 3 });
    const form = decided ? null : h("form", { class: "card", id: "decide", onsubmit: (e) => e.preventDefault() },
      field("Comment or feedback (feedback is required to request changes)", note),
      h("div", { class: "actions" },
        h("button", { type: "button", id: "approve", onclick: () => decide("approve", { comment: note.value }) }, "Approve and open the pull request"),
        h("button", { type: "button", id: "request-changes", class: "secondary", onclick: () => decide("requestChanges", { feedback: note.value }) }, "Request changes"),
        h("button", { type: "button", id: "reject", class: "secondary", onclick: () => { if (window.confirm("Reject this work?")) decide("reject", { reason: note.value }); } }, "Reject")));
    const pr = (r.pull_request && r.pull_request.url) ? r.pull_request : (job && job.pull_request && job.pull_request.url ? job.pull_request : null);
    fill(result, ...(pr ? [h("p", {}, "Pull request: ", h("a", { href: pr.url, class: "pr-link", rel: "noopener noreferrer" }, pr.url))]
      : decided ? [h("p", { class: "muted" }, r.status === "REVIEW_STATUS_APPROVED" ? "Approved: the pull request is being opened…" : "Decided: " + enumName(r.status, "REVIEW_STATUS_"))] : []));
    fill(body, 
      h("dl", { class: "facts" },
        [["Status", enumName(r.status, "REVIEW_STATUS_")], ["Repository", r.repo], ["Quality", r.quality_score ? `${r.quality_score}/10` : ""],
          ["Changes", `${stats.files_changed || (r.files || []).length} files, +${stats.additions || 0} −${stats.deletions || 0}`]]
          .filter(([, v]) => v).map(([k, v]) => [h("dt", {}, k), h("dd", k === "Status" ? { id: "review-status" } : {}, v)])),
      r.job_id ? h("p", {}, h("a", { href: "/jobs/" + encodeURIComponent(r.job_id), "data-nav": true }, "The job")) : null,
      (r.concerns || []).length ? [h("h2", {}, "Concerns"), h("ul", { class: "concerns" }, r.concerns.map((c) =>
        h("li", {}, [c.path ? `${c.path}${c.line ? ":" + c.line : ""}` : "", c.message].filter(Boolean).join(" — "))))] : null,
      r.documentation ? [h("h2", {}, "Notes"), h("pre", { class: "description" }, r.documentation)] : null,
      h("h2", {}, "Files"),
      (r.files || []).map((f) => {
        const d = f.diff || {};
        return h("details", { class: "file", open: true },
          h("summary", {}, h("code", {}, d.path || ""), ` ${enumName(d.action, "FILE_ACTION_")} +${d.additions || 0} −${d.deletions || 0}`),
          d.binary ? h("p", { class: "muted" }, "Binary file") : diffView(d.unified_diff || f.content || ""));
      }),
      form);
  };
  const load = async () => {
    review = (await api("GET", "/v1/reviews/" + encodeURIComponent(id))).review;
    if (review.job_id) job = (await api("GET", "/v1/jobs/" + encodeURIComponent(review.job_id))).job;
    draw();
  };
  // After an approval the pull request opens in the job: follow it until it has.
  let watching = false;
  const watchForPR = () => {
    if (watching || review.status !== "REVIEW_STATUS_APPROVED" || !review.job_id) return;
    if ((review.pull_request && review.pull_request.url) || (job && job.pull_request && job.pull_request.url)) return;
    watching = true;
    follow(`/v1/jobs/${encodeURIComponent(review.job_id)}:watch?from_now=true`, (ev) => {
      if (ev.event === "open" || ev.event === "JOB_EVENT_TYPE_PULL_REQUEST_OPENED" || ev.event === "JOB_EVENT_TYPE_STATUS_CHANGED" || ev.event === "end") load().catch(() => {});
    }, page.signal);
  };
  await load();
  show(h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "← Tasks")), h("h1", {}, "Review"), result, body, error);
  watchForPR();
}

// --- chat ---

async function chatListPage() {
  const list = await api("GET", "/v1/conversations?page_size=100");
  const convs = (list && list.conversations) || [];
  const repo = h("input", { type: "text", name: "repo", placeholder: "owner/name (optional)" });
  const title = h("input", { type: "text", name: "title", maxlength: 200, placeholder: "optional: taken from the first message" });
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "card", id: "new-conversation", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      const c = await api("POST", "/v1/conversations", { request_id: "console-" + crypto.randomUUID(), repo: repo.value.trim(), title: title.value.trim() });
      navigate("/chat/" + encodeURIComponent(c.conversation.id));
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("h2", {}, "New conversation"), field("Repository", repo), field("Title", title), h("button", { type: "submit" }, "Start a conversation"), error);
  show(h("h1", {}, "Chat"),
    convs.length === 0 ? h("p", { class: "empty" }, "No conversations yet. Start one below: ask for a change, and TheFold plans it, builds it and brings it to review.")
      : h("ul", { class: "conversations" }, convs.map((c) => h("li", {},
        h("a", { href: "/chat/" + encodeURIComponent(c.id), "data-nav": true }, c.title || "Untitled conversation"),
        h("span", { class: "muted" }, ` ${c.repo || ""} · ${c.message_count || 0} messages`)))),
    form);
}

// noticeLinks are the links of a notice's references.
function noticeLinks(refs) {
  const r = refs || {};
  return [
    r.task_id ? h("a", { href: "/tasks/" + encodeURIComponent(r.task_id), "data-nav": true }, "task") : null,
    r.job_id ? h("a", { href: "/jobs/" + encodeURIComponent(r.job_id), "data-nav": true, class: "notice-job" }, "job") : null,
    r.review_id ? h("a", { href: "/reviews/" + encodeURIComponent(r.review_id), "data-nav": true, class: "notice-review" }, "review") : null,
    r.pull_request_url ? h("a", { href: r.pull_request_url, class: "pr-link", rel: "noopener noreferrer" }, "pull request") : null,
  ].filter(Boolean).flatMap((a, i) => (i ? [" · ", a] : [a]));
}

function messageItem(m) {
  const role = enumName(m.role, "CHAT_ROLE_");
  if (m.notice) {
    const n = m.notice;
    const start = n.kind === "NOTICE_KIND_PLAN_PROPOSED" && n.refs && n.refs.project_id
      ? h("button", { type: "button", class: "secondary", onclick: async (e) => {
        e.target.disabled = true;
        try { await api("POST", `/v1/projects/${encodeURIComponent(n.refs.project_id)}:start`, {}); notice("The project started."); } catch (err) { notice(err.message, "error"); e.target.disabled = false; }
      } }, "Confirm and start the project")
      : null;
    return h("li", { class: "msg notice-msg", "data-id": m.id, "data-kind": n.kind || "" },
      h("span", { class: "who" }, "TheFold"), h("p", {}, m.text || enumName(n.kind, "NOTICE_KIND_")), h("p", { class: "links" }, noticeLinks(n.refs)), start);
  }
  if (m.tool_call) {
    return h("li", { class: "msg tool", "data-id": m.id },
      h("details", {}, h("summary", {}, "Tool: ", h("code", {}, m.tool_call.name || "")), h("pre", {}, JSON.stringify(m.tool_call.input || {}, null, 2))));
  }
  if (m.tool_result) {
    const r = m.tool_result;
    return h("li", { class: "msg tool" + (r.is_error ? " failed" : ""), "data-id": m.id },
      h("details", {}, h("summary", {}, (r.is_error ? "Tool failed: " : "Result: "), h("code", {}, r.name || "")), h("pre", {}, r.content || ""),
        h("p", { class: "links" }, noticeLinks(r.refs))));
  }
  return h("li", { class: "msg " + role, "data-id": m.id, "data-reply": m.reply_id || "" },
    h("span", { class: "who" }, role === "user" ? (!m.author || (session.user && m.author === session.user.id) ? "You" : m.author) : "TheFold"),
    h("div", { class: "text" }, m.text || ""),
    m.incomplete ? h("p", { class: "muted" }, "(the reply stopped early)") : null);
}

async function chatPage(rawID) {
  const id = decodeURIComponent(rawID);
  const conv = (await api("GET", "/v1/conversations/" + encodeURIComponent(id))).conversation;
  const first = await api("GET", `/v1/conversations/${encodeURIComponent(id)}/messages?page_size=200`);
  const log = h("ol", { class: "chat", id: "chat-log", "aria-label": "Messages" });
  const status = h("p", { class: "muted", id: "chat-live", role: "status" }, "Connecting…");
  const seen = new Set();
  const streams = new Map(); // reply id → the element its text streams into
  const add = (m) => {
    if (!m || !m.id || seen.has(m.id)) return;
    seen.add(m.id);
    const el = messageItem(m);
    const streaming = m.reply_id && m.role === "CHAT_ROLE_ASSISTANT" ? streams.get(m.reply_id) : null;
    if (streaming) { streaming.replaceWith(el); streams.delete(m.reply_id); } else log.append(el);
    el.scrollIntoView({ block: "nearest" });
  };
  ((first && first.messages) || []).forEach(add);
  const finished = new Set((first.messages || []).filter((m) => m.role === "CHAT_ROLE_ASSISTANT" && m.reply_id).map((m) => m.reply_id));

  const text = h("textarea", { name: "message", rows: 3, required: true, placeholder: "Ask for a change, e.g. “Add a health endpoint”" });
  const send = h("button", { type: "submit", id: "send" }, "Send");
  const stop = h("button", { type: "button", class: "secondary", id: "stop-reply", hidden: !conv.active_reply_id, onclick: async () => {
    try { await api("POST", `/v1/conversations/${encodeURIComponent(id)}:cancelReply`, {}); } catch (err) { notice(err.message, "error"); }
  } }, "Stop the reply");
  const error = h("p", { class: "error", role: "alert" });
  const compose = h("form", { class: "compose", id: "compose", onsubmit: async (e) => {
    e.preventDefault();
    if (!text.value.trim()) return;
    send.disabled = true;
    error.textContent = "";
    try {
      const r = await api("POST", `/v1/conversations/${encodeURIComponent(id)}/messages`, { request_id: "console-" + crypto.randomUUID(), text: text.value });
      add(r.message);
      text.value = "";
    } catch (err) {
      error.textContent = err.message;
    } finally {
      send.disabled = false;
      text.focus();
    }
  } }, field("Message", text), h("div", { class: "actions" }, send, stop), error);
  text.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) compose.requestSubmit(); });
  show(h("p", {}, h("a", { href: "/chat", "data-nav": true }, "← Conversations")),
    h("h1", {}, conv.title || "Conversation"), conv.repo ? h("p", { class: "muted" }, conv.repo) : null, log, status, compose);

  follow(`/v1/conversations/${encodeURIComponent(id)}:watch?after_id=0`, (ev) => {
    const d = ev.data || {};
    switch (ev.event) {
      case "open": status.textContent = ""; return;
      case "reconnecting": status.textContent = "Reconnecting…"; return;
      case "failure": status.textContent = "The stream failed: " + (d.message || "") + " — reconnecting"; return;
      case "end": return;
      case "CONVERSATION_EVENT_TYPE_MESSAGE_ADDED": add(d.message); return;
      case "CONVERSATION_EVENT_TYPE_REPLY_STARTED": stop.hidden = false; status.textContent = "TheFold is answering…"; return;
      case "CONVERSATION_EVENT_TYPE_REPLY_ENDED":
        stop.hidden = true; status.textContent = "";
        if (d.reply && d.reply.id) finished.add(d.reply.id);
        return;
      case "CONVERSATION_EVENT_TYPE_TEXT_DELTA": {
        const delta = d.delta || {};
        if (!delta.reply_id || finished.has(delta.reply_id)) return;
        let el = streams.get(delta.reply_id);
        if (!el) {
          el = h("li", { class: "msg assistant streaming", "data-reply": delta.reply_id }, h("span", { class: "who" }, "TheFold"), h("div", { class: "text" }));
          streams.set(delta.reply_id, el);
          log.append(el);
        }
        el.querySelector(".text").append(delta.text || "");
        el.scrollIntoView({ block: "nearest" });
        return;
      }
      default: return;
    }
  }, page.signal);
  text.focus();
}

// --- projects ---

async function projectsPage() {
  const list = await api("GET", "/v1/projects?page_size=100");
  const projects = (list && list.projects) || [];
  const repo = h("input", { type: "text", name: "repo", required: true, placeholder: "owner/name" });
  const mode = h("select", { name: "mode" },
    h("option", { value: "PROJECT_MODE_REVIEW" }, "review: one branch, one review, one pull request"),
    h("option", { value: "PROJECT_MODE_CREW" }, "crew: the repository's issues, parallel workers, a pull request each"));
  const request = h("textarea", { name: "request", rows: 3, placeholder: "What to build (review mode); crew mode works the repository's open issues" });
  const workers = h("input", { type: "number", name: "max_workers", min: 1, max: 16, value: 3 });
  const merge = h("select", { name: "merge_policy" },
    h("option", { value: "MERGE_POLICY_AUTO" }, "merge when the checks pass"), h("option", { value: "MERGE_POLICY_HUMAN" }, "a person merges"));
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "card", id: "plan-project", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    const crew = mode.value === "PROJECT_MODE_CREW";
    const body = { request_id: "console-" + crypto.randomUUID(), repo: repo.value.trim(), mode: mode.value };
    if (crew) Object.assign(body, { max_workers: Number(workers.value) || 3, merge_policy: merge.value });
    else body.request = request.value;
    try {
      const r = await api("POST", "/v1/projects", body);
      navigate("/projects/" + encodeURIComponent(r.project.id), { notice: "The plan is ready: edit it, then start it." });
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("h2", {}, "Plan a project"), field("Repository", repo), field("Mode", mode), field("Request", request),
  field("Workers (crew)", workers), field("Merging (crew)", merge), h("button", { type: "submit" }, "Plan it"), error);
  show(h("h1", {}, "Projects"),
    projects.length === 0 ? h("p", { class: "empty" }, "No projects yet. Plan one below: TheFold splits the work into phases and tasks you can edit before it starts.")
      : h("table", { class: "tasks" }, h("thead", {}, h("tr", {}, ["Project", "Repository", "Mode", "Status"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, projects.map((p) => h("tr", {},
          h("td", {}, h("a", { href: "/projects/" + encodeURIComponent(p.id), "data-nav": true }, p.description || p.request || p.id)),
          h("td", {}, p.repo || ""), h("td", {}, enumName(p.mode, "PROJECT_MODE_")), h("td", {}, enumName(p.status, "PROJECT_STATUS_")))))),
    form);
}

// workerText is one line of a worker's stream.
function projectEventText(ev) {
  const d = ev.data || {};
  if (d.job_event && d.job_event.event) return eventText(d.job_event.event.type, d.job_event.event);
  if (d.task) return enumName(ev.event, "PROJECT_EVENT_TYPE_") + (d.task.reason ? ` — ${d.task.reason}` : "");
  if (d.message) return "Message: " + (d.message.text || "");
  if (d.status_change) return "Status: " + enumName(d.status_change.status, "PROJECT_STATUS_") + (d.status_change.reason ? ` — ${d.status_change.reason}` : "");
  return enumName(ev.event, "PROJECT_EVENT_TYPE_");
}

async function projectPage(rawID) {
  const id = decodeURIComponent(rawID);
  const head = h("div", { id: "project-head" });
  const planBox = h("div", { id: "project-plan" });
  const poolBox = h("div", { id: "project-pool" });
  const log = h("ol", { class: "timeline", id: "project-events", "aria-label": "What the project did" });
  const live = h("p", { class: "muted", id: "project-live" }, "Connecting…");
  const error = h("p", { class: "error", role: "alert" });
  const workerLogs = new Map(); // worker number → its stream's list
  let selected = 1;
  let planDrawn = false;
  let project = null;
  let pool = null;

  const post = async (path, body) => {
    error.textContent = "";
    try { await api("POST", `/v1/projects/${encodeURIComponent(id)}${path}`, body || {}); await load(); } catch (err) { error.textContent = err.message; }
  };
  const workerLog = (n) => {
    if (!workerLogs.has(n)) workerLogs.set(n, h("ol", { class: "timeline worker-log", "data-worker": n, "aria-label": `Worker ${n}'s events` }));
    return workerLogs.get(n);
  };

  const drawHead = () => {
    const p = project;
    const crew = p.mode === "PROJECT_MODE_CREW";
    const actions = [];
    if (p.status === "PROJECT_STATUS_PLANNED") actions.push(h("button", { type: "button", id: "start-project", onclick: () => { notice(""); post(":start"); } }, "Start the project"));
    if (p.status === "PROJECT_STATUS_RUNNING") actions.push(h("button", { type: "button", class: "secondary", onclick: () => post(":pause") }, "Pause"));
    if (p.status === "PROJECT_STATUS_PAUSED") actions.push(h("button", { type: "button", onclick: () => post(":resume") }, "Resume"));
    if (["PROJECT_STATUS_PLANNED", "PROJECT_STATUS_RUNNING", "PROJECT_STATUS_PAUSED", "PROJECT_STATUS_HUMAN_NEEDED"].includes(p.status)) {
      actions.push(h("button", { type: "button", class: "secondary", onclick: () => { if (window.confirm("Cancel this project?")) post(":cancel"); } }, "Cancel"));
    }
    const usage = p.usage || {};
    fill(head,
      h("dl", { class: "facts" }, [
        ["Status", enumName(p.status, "PROJECT_STATUS_") + (p.status_reason ? ` — ${p.status_reason}` : ""), "project-status"],
        ["Mode", enumName(p.mode, "PROJECT_MODE_") + (crew && p.max_workers ? `, ${p.max_workers} workers` : "")],
        ["Repository", p.repo + (p.branch ? ` · ${p.branch}` : "")],
        ["Cost", usage.cost_micros ? money(usage.cost_micros) : ""],
      ].filter(([, v]) => v).map(([k, v, elID]) => [h("dt", {}, k), h("dd", elID ? { id: elID } : {}, v)])),
      h("div", { class: "actions" }, actions,
        p.review_id ? h("a", { href: "/reviews/" + encodeURIComponent(p.review_id), "data-nav": true }, "Open the review") : null,
        p.pull_request && p.pull_request.url ? h("a", { href: p.pull_request.url, class: "pr-link", rel: "noopener noreferrer" }, "Pull request") : null));
  };

  // The plan: editable while PLANNED (titles, descriptions, removing a task), read-only after.
  const drawPlan = () => {
    const p = project;
    const editable = p.status === "PROJECT_STATUS_PLANNED";
    const phases = JSON.parse(JSON.stringify(p.phases || []));
    const save = h("button", { type: "button", id: "save-plan", hidden: true, onclick: async () => {
      error.textContent = "";
      try {
        const r = await api("PATCH", `/v1/projects/${encodeURIComponent(id)}?update_mask=phases`, { etag: p.etag, phases });
        project = r.project;
        notice("The plan is saved.");
        drawPlan();
        drawHead();
      } catch (err) {
        error.textContent = err.message;
      }
    } }, "Save the plan");
    const changed = () => { save.hidden = false; };
    fill(planBox, h("h2", {}, "Plan"), phases.map((ph, pi) => h("section", { class: "phase" },
      h("h3", {}, `Phase ${ph.number || pi + 1}: `, ph.name || ""),
      h("ol", { class: "plan-tasks" }, (ph.tasks || []).map((t, ti) => {
        const status = enumName(t.status, "PROJECT_TASK_STATUS_");
        const links = [
          t.job_id ? h("a", { href: "/jobs/" + encodeURIComponent(t.job_id), "data-nav": true }, "job") : null,
          t.pull_request && t.pull_request.url ? h("a", { href: t.pull_request.url, rel: "noopener noreferrer" }, `PR #${t.pull_request.number || ""}`) : null,
        ].filter(Boolean);
        if (!editable) {
          return h("li", { "data-task": t.id }, h("strong", {}, t.title), ` — ${status}`, t.worker ? ` (worker ${t.worker})` : "",
            t.depends_on && t.depends_on.length ? h("span", { class: "muted" }, ` after ${t.depends_on.length}`) : null,
            links.flatMap((a) => [" · ", a]));
        }
        const title = h("input", { type: "text", name: "task-title", value: t.title || "", "aria-label": "Task title" });
        const desc = h("textarea", { name: "task-description", rows: 2, "aria-label": "Task description" });
        desc.value = t.description || "";
        title.addEventListener("input", () => { phases[pi].tasks[ti].title = title.value; changed(); });
        desc.addEventListener("input", () => { phases[pi].tasks[ti].description = desc.value; changed(); });
        const remove = h("button", { type: "button", class: "secondary", onclick: () => {
          phases[pi].tasks.splice(ti, 1);
          for (const other of phases.flatMap((x) => x.tasks || [])) other.depends_on = (other.depends_on || []).filter((d) => d !== t.id);
          changed();
          li.remove();
        } }, "Remove");
        const li = h("li", { class: "card", "data-task": t.id }, field("Title", title), field("Description", desc),
          t.depends_on && t.depends_on.length ? h("p", { class: "muted" }, `Depends on ${t.depends_on.length} earlier task(s)`) : null, remove);
        return li;
      })))), editable ? save : null);
  };

  const drawPool = () => {
    if (!pool || !(pool.workers || []).length) { fill(poolBox); return; }
    const tabs = h("div", { role: "tablist", class: "tabs", "aria-label": "Workers" });
    const panels = [];
    for (const w of pool.workers) {
      const n = w.number;
      const on = n === selected;
      tabs.append(h("button", { type: "button", role: "tab", id: `worker-tab-${n}`, "aria-selected": on ? "true" : "false", "aria-controls": `worker-${n}`,
        tabindex: on ? "0" : "-1", onclick: () => { selected = n; drawPool(); } }, `Worker ${n} · ${enumName(w.state, "WORKER_STATE_")}`));
      const msg = h("input", { type: "text", name: "worker-message", "aria-label": `Message to worker ${n}` });
      panels.push(h("section", { role: "tabpanel", id: `worker-${n}`, "aria-labelledby": `worker-tab-${n}`, hidden: !on, class: "worker" },
        h("p", {}, w.title ? ["Working on ", h("strong", {}, w.title), w.phase ? ` — ${enumName(w.phase, "JOB_PHASE_")}` : ""] : "Idle",
          w.job_id ? [" · ", h("a", { href: "/jobs/" + encodeURIComponent(w.job_id), "data-nav": true }, "job")] : null,
          ` · ${w.tasks_done || 0} done`),
        h("form", { class: "actions", onsubmit: (e) => {
          e.preventDefault();
          if (msg.value.trim()) post("/messages", { worker: n, text: msg.value, request_id: "console-" + crypto.randomUUID() }).then(() => { msg.value = ""; });
        } }, msg, h("button", { type: "submit" }, "Send to the worker"),
        w.state === "WORKER_STATE_INTERRUPTED"
          ? h("button", { type: "button", class: "secondary", onclick: () => post(`/workers/${n}:resume`) }, "Resume")
          : h("button", { type: "button", class: "secondary", disabled: w.state !== "WORKER_STATE_WORKING", onclick: () => post(`/workers/${n}:interrupt`, { reason: "interrupted from the console" }) }, "Interrupt")),
        workerLog(n)));
    }
    tabs.addEventListener("keydown", (e) => {
      const ns = pool.workers.map((w) => w.number);
      const i = ns.indexOf(selected);
      if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
        selected = ns[(i + (e.key === "ArrowRight" ? 1 : ns.length - 1)) % ns.length];
        drawPool();
        document.getElementById(`worker-tab-${selected}`).focus();
      }
    });
    const queue = (pool.merge_queue || []).length ? h("p", { class: "muted" }, `Merge queue: ${pool.merge_queue.length}`) : null;
    fill(poolBox, h("h2", {}, "Workers"), queue, tabs, panels);
  };

  const load = async () => {
    project = (await api("GET", "/v1/projects/" + encodeURIComponent(id))).project;
    // The pool while the crew works; once it has finished the last one seen stays, with the
    // workers' streams.
    if (project.mode === "PROJECT_MODE_CREW" && project.status !== "PROJECT_STATUS_PLANNED") {
      try {
        const next = await api("GET", `/v1/projects/${encodeURIComponent(id)}/pool`);
        if ((next.workers || []).length || !pool) pool = next;
      } catch (_) { /* keep the last pool */ }
    }
    drawHead();
    // The editor is drawn once while the plan waits: a live update must not replace the
    // fields under the person's hands (it is drawn again after a save, and once started).
    if (project.status !== "PROJECT_STATUS_PLANNED" || !planDrawn) {
      drawPlan();
      planDrawn = true;
    }
    drawPool();
  };
  await load();
  show(h("p", {}, h("a", { href: "/projects", "data-nav": true }, "← Projects")), h("h1", {}, "Project"), head, error, poolBox, planBox,
    h("h2", {}, "Events"), live, log);

  const reload = debounce(() => load().catch(() => {}), 200);
  follow(`/v1/projects/${encodeURIComponent(id)}:watch?after_id=0`, (ev) => {
    if (streamState(ev, live, "project", reload)) return;
    const d = ev.data || {};
    const time = d.time ? new Date(d.time).toLocaleTimeString() : "";
    const item = () => h("li", { "data-id": ev.id, "data-type": ev.event }, time ? h("time", {}, time) : null, " ", projectEventText(ev));
    if (d.worker) workerLog(d.worker).append(item());
    if (ev.event !== "PROJECT_EVENT_TYPE_JOB_EVENT") log.append(item());
    reload();
  }, page.signal);
}

// --- memory, repositories, settings ---

async function memoryPage() {
  const params = new URLSearchParams(location.search);
  const query = h("input", { type: "search", name: "query", required: true, value: params.get("q") || "", placeholder: "e.g. how we retry database writes" });
  const repo = h("input", { type: "text", name: "repo", value: params.get("repo") || "", placeholder: "owner/name (optional)" });
  const form = h("form", { class: "filters", role: "search", id: "memory-search", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams({ q: query.value.trim() });
    if (repo.value.trim()) q.set("repo", repo.value.trim());
    navigate("/memory?" + q);
  } }, field("Search the memories", query), field("Repository", repo), h("button", { type: "submit" }, "Search"));
  let results = null;
  if (params.get("q")) {
    const r = await api("POST", "/v1/memories:search", { query: params.get("q"), repo: params.get("repo") || "", limit: 20 });
    const rows = (r && r.results) || [];
    results = rows.length === 0 ? h("p", { class: "empty" }, "Nothing matches. Memories come from finished jobs: decisions, patterns, errors and strategies.")
      : h("ol", { class: "memories", id: "memory-results" }, rows.map((x) => {
        const m = x.memory || {};
        const sc = x.score || {};
        return h("li", { class: "card" },
          h("p", {}, h("strong", {}, enumName(m.type, "MEMORY_TYPE_")), m.repo ? ` · ${m.repo}` : "", ` · score ${Number(sc.final || 0).toFixed(3)}`),
          h("p", { class: "text" }, m.summary || m.content || ""),
          h("p", { class: "muted reason" }, sc.reason || ""),
          (m.tags || []).length ? h("p", { class: "muted" }, "Tags: " + m.tags.join(", ")) : null);
      }));
  }
  show(h("h1", {}, "Memory"), form, results);
  query.focus();
}

async function reposPage() {
  const r = await api("GET", "/v1/repos?page_size=100");
  const repos = (r && r.repos) || [];
  show(h("h1", {}, "Repositories"),
    repos.length === 0 ? h("p", { class: "empty" }, "No repositories yet. Create one on the local forge (thefold repos create) or connect GitHub.")
      : h("table", { class: "tasks", id: "repos" }, h("thead", {}, h("tr", {}, ["Repository", "Provider", "Default branch", ""].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, repos.map((x) => h("tr", {},
          h("td", {}, x.repo || `${x.owner}/${x.name}`, x.description ? h("span", { class: "muted" }, ` — ${x.description}`) : null),
          h("td", {}, enumName(x.provider, "REPO_PROVIDER_")), h("td", {}, x.default_branch || ""),
          h("td", {}, h("a", { href: "/tasks?repo=" + encodeURIComponent(x.repo || ""), "data-nav": true }, "tasks")))))));
}

const SCOPE_AREAS = ["*", "tasks", "agent", "builder", "github", "memory", "skills", "ai", "sandbox", "auth"];

async function settingsPage() {
  const list = await api("GET", "/v1/auth/api-keys");
  const keys = (list && list.api_keys) || [];
  const name = h("input", { type: "text", name: "key-name", required: true, maxlength: 100, placeholder: "e.g. ci" });
  const area = h("select", { name: "key-area" }, SCOPE_AREAS.map((a) => h("option", { value: a }, a === "*" ? "every service" : a)));
  const access = h("select", { name: "key-access" }, h("option", { value: "read" }, "read"), h("option", { value: "write" }, "write (reads included)"));
  const secretBox = h("div", { id: "key-secret", role: "status" });
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "card", id: "new-key", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      const r = await api("POST", "/v1/auth/api-keys", { name: name.value.trim(), scopes: [`${area.value}:${access.value}`], request_id: "console-" + crypto.randomUUID() });
      await settingsPage();
      fill(document.getElementById("key-secret"), h("div", { class: "card secret" },
        h("p", {}, "The key ", h("strong", {}, r.api_key.name), " — copy it now: it is shown only once."),
        h("pre", { class: "secret-value" }, r.secret)));
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("h2", {}, "New API key"), field("Name", name), field("Service", area), field("Access", access),
  h("button", { type: "submit" }, "Create the key"), error);
  const rows = keys.map((k) => {
    const revoked = !!k.revoke_time;
    return h("tr", { "data-key": k.id },
      h("td", {}, k.name), h("td", {}, h("code", {}, k.prefix || "")), h("td", {}, (k.scopes || []).join(", ")),
      h("td", {}, revoked ? "revoked" : k.expire_time ? "until " + new Date(k.expire_time).toLocaleDateString() : ""),
      h("td", {}, revoked ? "" : h("button", { type: "button", class: "secondary", onclick: async (e) => {
        if (!window.confirm(`Revoke the key "${k.name}"? Tools using it stop working at once.`)) return;
        e.target.disabled = true;
        try { await api("POST", `/v1/auth/api-keys/${encodeURIComponent(k.id)}:revoke`, {}); await settingsPage(); } catch (err) { error.textContent = err.message; e.target.disabled = false; }
      } }, "Revoke")));
  });
  show(h("h1", {}, "Settings"), h("h2", {}, "API keys"),
    keys.length === 0 ? h("p", { class: "empty" }, "No API keys. Create one for a tool or a script; it acts as you, within its scopes.")
      : h("table", { class: "tasks", id: "keys" }, h("thead", {}, h("tr", {}, ["Name", "Prefix", "Scopes", "State", ""].map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)),
    secretBox, form);
}

// --- usage and skills ---

// barChart is an SVG bar chart of rows [{label, value, text}] (values ≥ 0).
function barChart(rows, label) {
  const el = svgEl;
  const W = 28, G = 10, H = 160, TOP = 18, BOTTOM = 34;
  const max = Math.max(...rows.map((r) => r.value), 1e-9);
  const width = rows.length * (W + G) + G;
  return el("svg", { viewBox: `0 0 ${width} ${H + TOP + BOTTOM}`, width, height: H + TOP + BOTTOM, role: "img", "aria-label": label, class: "chart" },
    ...rows.map((r, i) => {
      const h = Math.max(1, Math.round((r.value / max) * H));
      const x = G + i * (W + G);
      return el("g", { class: "bar", "data-label": r.label },
        el("title", {}, `${r.label}: ${r.text}`),
        el("rect", { x, y: TOP + H - h, width: W, height: h, rx: 3 }),
        el("text", { x: x + W / 2, y: TOP + H + 14, "text-anchor": "middle", class: "axis" }, r.label.slice(5)),
        el("text", { x: x + W / 2, y: TOP + H - h - 4, "text-anchor": "middle", class: "value" }, r.text));
    }));
}

async function usagePage() {
  const params = new URLSearchParams(location.search);
  const days = Math.min(Math.max(Number(params.get("days")) || 14, 1), 90);
  const start = new Date(Date.now() - days * 86400000).toISOString();
  const q = (group) => `/v1/ai/usage?group_by=${group}&start_time=${encodeURIComponent(start)}`;
  const [byDay, byModel] = await Promise.all([api("GET", q("USAGE_GROUP_BY_DAY")), api("GET", q("USAGE_GROUP_BY_MODEL"))]);
  const total = (byDay && byDay.total) || {};
  const dayRows = ((byDay && byDay.rows) || []).slice().sort((a, b) => String(a.day).localeCompare(String(b.day)));
  const range = h("p", { class: "views" }, [7, 14, 30, 90].flatMap((d, i) => [i ? " · " : "",
    d === days ? `${d} days` : h("a", { href: `/usage?days=${d}`, "data-nav": true }, `${d} days`)]));
  show(h("h1", {}, "Usage"), range,
    h("dl", { class: "facts", id: "usage-total" }, [
      ["Cost", money(total.cost_micros)], ["Calls", String(total.calls || 0) + (total.failed_calls ? ` (${total.failed_calls} failed)` : "")],
      ["Tokens", `${total.input_tokens || 0} in, ${total.output_tokens || 0} out, ${total.cache_read_tokens || 0} from the cache`],
    ].map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    h("h2", {}, "Cost per day"),
    dayRows.length ? h("div", { class: "graph", id: "usage-chart" }, barChart(dayRows.map((r) => ({ label: String(r.day || ""), value: Number(r.cost_micros || 0), text: money(r.cost_micros) })), "Cost per day"))
      : h("p", { class: "empty" }, "No model calls in this period."),
    h("h2", {}, "Per model"),
    h("table", { class: "tasks", id: "usage-models" }, h("thead", {}, h("tr", {}, ["Model", "Provider", "Calls", "Tokens in", "Tokens out", "Cost"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, ((byModel && byModel.rows) || []).map((r) => h("tr", {}, h("td", {}, r.model || ""), h("td", {}, r.provider || ""),
        h("td", {}, String(r.calls || 0)), h("td", {}, String(r.input_tokens || 0)), h("td", {}, String(r.output_tokens || 0)), h("td", {}, money(r.cost_micros)))))));
}

async function skillsPage() {
  const r = await api("GET", "/v1/skills?page_size=200");
  const skills = (r && r.skills) || [];
  show(h("h1", {}, "Skills"),
    h("p", { class: "muted" }, "Skills are guidance the models get for matching tasks. Admins edit them with the API or `thefold skills`."),
    skills.length === 0 ? h("p", { class: "empty" }, "No skills.")
      : h("table", { class: "tasks", id: "skills" }, h("thead", {}, h("tr", {}, ["Skill", "Category", "Phase", "Scope", "Enabled", "Confidence"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, skills.map((k) => h("tr", {},
          h("td", {}, h("details", {}, h("summary", {}, k.name || k.id), k.description ? h("p", {}, k.description) : null, h("pre", { class: "description" }, k.prompt_fragment || ""))),
          h("td", {}, enumName(k.category, "SKILL_CATEGORY_")), h("td", {}, enumName(k.phase, "SKILL_PHASE_")),
          h("td", {}, enumName(k.scope, "SKILL_SCOPE_") + (k.repo ? ` (${k.repo})` : "")),
          h("td", {}, k.enabled ? "yes" : "no"), h("td", {}, k.confidence ? Number(k.confidence).toFixed(2) : ""))))));
}

// --- start ---

function theme(next) {
  const t = next || localStorage.getItem("thefold-theme") || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
  document.documentElement.dataset.theme = t;
  localStorage.setItem("thefold-theme", t);
}

document.getElementById("theme").addEventListener("click", () => theme(document.documentElement.dataset.theme === "dark" ? "light" : "dark"));
document.getElementById("signout").addEventListener("click", async () => {
  try { await consoleSession("/sign-out"); } catch (_) { /* the cookie is cleared either way */ }
  signedOut("You are signed out.");
});

theme();
refresh().then(render);
