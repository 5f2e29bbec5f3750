// TheFold's console: a small single-page application over the REST API (/v1).
//
// Safety rules this file keeps: every string from the API or the user goes into the page
// as text (textContent, attribute values through setAttribute), never as HTML; a link's
// href is only ever a path of the console or an http(s) URL; the access token lives in
// memory only (the session cookie, which a script cannot read, brings a new one on load).

const session = { token: "", expires: 0, user: null, timer: 0 };

const STATUSES = ["BACKLOG", "PLANNED", "IN_PROGRESS", "IN_REVIEW", "DONE", "BLOCKED", "CANCELLED"];
const SOURCES = ["MANUAL", "API", "GITHUB", "LINEAR", "CHAT", "HEALING", "PROJECT"];

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

// redraw fills el with what build makes, only when key (what the drawing shows) differs
// from the last drawing's: a live update that changes nothing leaves the elements alone, and
// with them a click on the way or the text under the person's hands.
function redraw(el, key, build) {
  if (el.dataset.drawn === key) return;
  el.dataset.drawn = key;
  fill(el, build());
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

// StalePage is thrown by api when the page that made the call was left while it was under
// way: the page's code stops there instead of drawing over the page that followed (a slow
// answer for the list must not replace the task page the person went on to).
class StalePage extends Error {}

// api calls the REST API with the session's access token, refreshing it once on a 401.
async function api(method, path, body) {
  const owner = page;
  const call = () => request(method, path, body, session.token ? { Authorization: "Bearer " + session.token } : {});
  let result;
  try {
    result = await call();
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 401) throw e;
    if (!(await refresh())) {
      signedOut("Your session ended. Sign in again.");
      throw e;
    }
    result = await call();
  }
  if (owner.signal.aborted) throw new StalePage("the page was left");
  return result;
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

// refresh buys a new access token with the session's cookie. An answer that refuses it (a
// 4xx other than 429: the session is over) signs the person out; a failure that may pass
// (no answer, a 5xx, 429) is tried again, four times over about 7 s, well within the 30 s in which the
// server answers a spent refresh token's retry with the same successor. A page loaded while
// the server was briefly overloaded once showed the sign-in page to a signed-in person.
async function refresh() {
  for (let attempt = 0; ; attempt++) {
    try {
      adopt(await consoleSession("/refresh"));
      if (!session.user) session.user = await whoami();
      header();
      return true;
    } catch (e) {
      const passing = !(e instanceof ApiError) || e.status >= 500 || e.status === 429;
      if (!passing || attempt >= 4) return false;
      await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
    }
  }
}

async function whoami() {
  const me = await request("GET", "/v1/auth/whoami", undefined, { Authorization: "Bearer " + session.token });
  try {
    const u = await request("GET", "/v1/users/" + encodeURIComponent(me.user_id), undefined, { Authorization: "Bearer " + session.token });
    return { id: me.user_id, role: me.role, ...(u.user || {}) };
  } catch (_) {
    return { id: me.user_id, role: me.role };
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
  [/^\/repos\/([^/]+)\/([^/]+)$/, repoPage],
  [/^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)$/, pullRequestPage],
  [/^\/models$/, modelsPage],
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

// rendered is the path and query of the page on screen.
let rendered = "";

async function render() {
  page.abort();
  page = new AbortController();
  const path = location.pathname;
  rendered = path + location.search;
  const state = history.state || {};
  notice(state.notice || "", state.kind || "info");
  if (!session.token && path !== "/signin") {
    navigate("/signin", { next: path + location.search }, true);
    return;
  }
  for (const [re, route] of routes) {
    const m = path.match(re);
    if (m) {
      const mine = page;
      try {
        await route(...m.slice(1));
      } catch (e) {
        if (e instanceof StalePage || mine.signal.aborted) return;
        show(h("h1", {}, "Something went wrong"), h("p", { class: "error" }, e.message),
          h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "Back to the tasks")));
      }
      if (mine.signal.aborted) return;
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
// Back and forward render the page they land on; a change of the fragment alone (the skip
// link's #main) is not a new page.
window.addEventListener("popstate", () => { if (location.pathname + location.search !== rendered) render(); });

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
  const source = h("select", { name: "source" }, h("option", { value: "" }, "any"),
    SOURCES.map((x) => h("option", { value: "TASK_SOURCE_" + x, selected: params.get("source") === "TASK_SOURCE_" + x }, x.toLowerCase())));
  const label = h("input", { type: "text", name: "label", value: params.get("label") || "", placeholder: "e.g. bug" });
  const filters = h("form", { class: "filters", role: "search", onsubmit: (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (repo.value.trim()) q.set("repo", repo.value.trim());
    if (status.value) q.set("status", status.value);
    if (source.value) q.set("source", source.value);
    if (label.value.trim()) q.set("label", label.value.trim());
    navigate("/tasks" + (q.toString() ? "?" + q : ""));
  } }, field("Repository", repo), field("Status", status), field("Source", source), field("Label", label), h("button", { type: "submit" }, "Filter"));

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
  if (params.get("source")) q.set("source", params.get("source"));
  if (params.get("label")) q.set("label", params.get("label"));
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
  const edit = taskEditForm(t);
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
    edit,
  );
}

// taskEditForm changes a task's title, description and labels, or deletes the task.
function taskEditForm(t) {
  const title = h("input", { type: "text", name: "edit-title", required: true, maxlength: 500, value: t.title });
  const description = h("textarea", { name: "edit-description", rows: 5 }, t.description || "");
  const labels = h("input", { type: "text", name: "edit-labels", value: (t.labels || []).join(", "), placeholder: "comma-separated" });
  const error = h("p", { class: "error", role: "alert" });
  return h("details", { class: "edit" }, h("summary", {}, "Edit the task"),
    h("form", { class: "card", id: "edit-task", onsubmit: async (e) => {
      e.preventDefault();
      error.textContent = "";
      try {
        await api("PATCH", `/v1/tasks/${encodeURIComponent(t.id)}?update_mask=title,description,labels`,
          { title: title.value, description: description.value, labels: commaList(labels.value) });
        navigate(location.pathname, { notice: "The task is saved." }, true);
      } catch (err) {
        error.textContent = err.message;
      }
    } }, field("Title", title), field("Description", description), field("Labels", labels),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Save"),
      h("button", { type: "button", class: "secondary", id: "delete-task", onclick: async () => {
        if (!window.confirm(`Delete the task "${t.title}"?`)) return;
        try { await api("DELETE", `/v1/tasks/${encodeURIComponent(t.id)}`); navigate("/tasks", { notice: "The task is deleted." }); } catch (err) { error.textContent = err.message; }
      } }, "Delete the task")), error));
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
    // A job that needs a person: skip its task, or say what was done and resolve it.
    let human = null;
    if (j.status === "JOB_STATUS_HUMAN_NEEDED") {
      const why = h("textarea", { name: "human-note", rows: 2 });
      const post = (verb, body) => async () => {
        actionError.textContent = "";
        try { await api("POST", `/v1/jobs/${encodeURIComponent(id)}:${verb}`, body()); await load(); } catch (err) { actionError.textContent = err.message; }
      };
      human = h("form", { class: "card", id: "human-needed", onsubmit: (e) => e.preventDefault() },
        h("p", {}, "The job needs a person" + (j.status_reason ? ": " + j.status_reason : ".")),
        field("What you did, or why the task is skipped", why),
        h("div", { class: "actions" },
          h("button", { type: "button", id: "resolve-task", onclick: post("resolveTask", () => ({ note: why.value })) }, "I fixed it: resolve"),
          h("button", { type: "button", class: "secondary", id: "skip-task", onclick: post("skipTask", () => ({ reason: why.value })) }, "Skip the task")));
    }
    const plan = j.plan && (j.plan.steps || []).length
      ? h("details", { class: "plan" }, h("summary", {}, `Plan: ${j.plan.steps.length} steps`), j.plan.summary ? h("p", {}, j.plan.summary) : null,
        h("ol", {}, j.plan.steps.map((st) => h("li", {}, [enumName(st.action, "FILE_ACTION_"), st.path, (st.command || []).join(" ")].filter(Boolean).join(" ")))))
      : null;
    const key = JSON.stringify([rows, j.status, j.review_id, j.pull_request, j.task_id, j.clarification_question, j.plan]);
    redraw(facts, key, () => [
      h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", k === "Status" ? { id: "job-status" } : {}, v)])),
      h("div", { class: "actions" }, actions,
        j.review_id ? h("a", { href: "/reviews/" + encodeURIComponent(j.review_id), "data-nav": true, id: "job-review" }, "Open the review") : null,
        j.pull_request && j.pull_request.url ? h("a", { href: j.pull_request.url, class: "pr-link", rel: "noopener noreferrer" }, `Pull request #${j.pull_request.number || ""}`) : null,
        j.task_id ? h("a", { href: "/tasks/" + encodeURIComponent(j.task_id), "data-nav": true }, "The task") : null),
      clarify, human, plan]);
    const phases = (metrics && metrics.phases) || [];
    redraw(phaseBox, JSON.stringify(phases), () => phases.length === 0 ? [] : [h("h2", {}, "Per phase"),
      h("table", { class: "tasks", id: "job-phases" }, h("thead", {}, h("tr", {}, ["Phase", "Time", "Model calls", "Tokens in", "Tokens out", "Cost"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, phases.map((m) => {
          const u = m.usage || {};
          return h("tr", {}, h("td", {}, enumName(m.phase, "JOB_PHASE_")), h("td", {}, m.duration || ""), h("td", {}, String(u.calls || 0)),
            h("td", {}, String(u.input_tokens || 0)), h("td", {}, String(u.output_tokens || 0)), h("td", {}, money(u.cost_micros)));
        })))]);
  };
  let metrics = null;
  const phaseBox = h("div", { id: "job-metrics" });
  const load = async () => {
    const [j, m] = await Promise.all([api("GET", "/v1/jobs/" + encodeURIComponent(id)),
      api("GET", `/v1/jobs/${encodeURIComponent(id)}/metrics`).catch((e) => { if (e instanceof StalePage) throw e; return null; })]);
    job = j.job;
    metrics = m;
    draw();
  };
  // The audit log: every action the job took (tool calls, sandbox commands, decisions), read
  // when opened.
  const audit = h("details", { id: "job-audit", ontoggle: async () => {
    if (!audit.open) return;
    try {
      const r = await api("GET", `/v1/audit-log?job_id=${encodeURIComponent(id)}&page_size=200`);
      const entries = (r && r.entries) || [];
      fill(auditList, entries.length === 0 ? h("li", { class: "empty" }, "Nothing recorded yet.") : entries.map((a) => h("li", { class: a.success ? "" : "failed" },
        h("time", {}, a.create_time ? new Date(a.create_time).toLocaleTimeString() : ""), " ", h("code", {}, a.action || ""), ` by ${a.actor || "?"}`,
        a.duration ? ` (${a.duration})` : "", a.success ? "" : ` — failed: ${a.error || ""}`)));
    } catch (err) {
      if (!(err instanceof StalePage)) fill(auditList, h("li", { class: "error" }, err.message));
    }
  } }, h("summary", {}, "Audit log"));
  const auditList = h("ol", { class: "timeline" });
  audit.append(auditList);
  await load();
  show(h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "← Tasks")), h("h1", {}, "Job"), facts, actionError, phaseBox,
    h("h2", {}, "Timeline"), live, timeline, audit);

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

// --- code: syntax highlighting, files and diffs ---

// The words highlighted as keywords, across the languages TheFold builds (Go, TypeScript and
// JavaScript, Python); a word of one language in another's file is rare enough to accept.
const KEYWORDS = new Set(("break case chan const continue default defer else fallthrough for func go goto if import " +
  "interface map package range return select struct switch type var nil true false iota " +
  "async await class debugger delete do export extends finally function in instanceof let new null of static super " +
  "this throw try typeof undefined void while with yield enum implements private protected public readonly as from " +
  "and assert def del elif except global is lambda nonlocal not or pass raise None True False").split(" "));

// langOf names the highlighting a path gets: "c" (// and /* */ comments), "hash" (#
// comments) or "" (none).
function langOf(path) {
  const ext = String(path || "").toLowerCase().split(".").pop();
  if (["go", "js", "mjs", "cjs", "ts", "tsx", "jsx", "java", "c", "h", "cc", "cpp", "rs", "kt", "swift", "css", "proto"].includes(ext)) return "c";
  if (["py", "sh", "bash", "yaml", "yml", "toml", "rb", "mk", "dockerfile"].includes(ext) || /(^|\/)(makefile|dockerfile)$/i.test(path)) return "hash";
  return "";
}

// highlight splits one line of code into text and <span class="tok-…"> nodes (keyword,
// string, number, comment). The line only ever becomes text: nothing in it is parsed as
// HTML. A comment or string that spans lines is highlighted on its first line only.
function highlight(line, lang) {
  if (!lang) return [line];
  const comment = lang === "c" ? "//.*|/\\*.*?(?:\\*/|$)" : "#.*";
  const re = new RegExp(`(${comment})|("(?:[^"\\\\]|\\\\.)*"?|'(?:[^'\\\\]|\\\\.)*'?|\`[^\`]*\`?)|(\\b\\d[\\w.]*)|([A-Za-z_]\\w*)`, "g");
  const out = [];
  let at = 0;
  for (const m of line.matchAll(re)) {
    const cls = m[1] ? "tok-c" : m[2] ? "tok-s" : m[3] ? "tok-n" : KEYWORDS.has(m[4]) ? "tok-k" : "";
    if (!cls) continue;
    if (m.index > at) out.push(line.slice(at, m.index));
    out.push(h("span", { class: cls }, m[0]));
    at = m.index + m[0].length;
  }
  if (at < line.length) out.push(line.slice(at));
  return out;
}

// codeView shows a file's text with line numbers and highlighting.
function codeView(text, path) {
  const lang = langOf(path);
  const lines = String(text || "").replace(/\n$/, "").split("\n");
  return h("table", { class: "code", "aria-label": path || "File" },
    h("tbody", {}, lines.map((l, i) => h("tr", {}, h("td", { class: "ln" }, String(i + 1)), h("td", { class: "src" }, highlight(l, lang))))));
}

// diffMode is the person's choice of diff layout: "unified" or "split" (side by side).
function diffMode(next) {
  if (next) localStorage.setItem("thefold-diff", next);
  return localStorage.getItem("thefold-diff") === "split" ? "split" : "unified";
}

// diffModeSwitch is the two buttons that choose the layout; onChange redraws.
function diffModeSwitch(onChange) {
  const mode = diffMode();
  const b = (m, label) => h("button", { type: "button", class: "secondary", "aria-pressed": String(mode === m), "data-diff-mode": m,
    onclick: () => { diffMode(m); onChange(); } }, label);
  return h("div", { class: "actions diff-modes", role: "group", "aria-label": "Diff layout" }, b("unified", "Unified"), b("split", "Side by side"));
}

// diffView renders a unified diff of the file at path, unified or side by side, highlighted.
function diffView(text, path, mode) {
  const lang = langOf(path);
  const lines = String(text || "").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  if ((mode || diffMode()) !== "split") {
    const pre = h("pre", { class: "diff" });
    for (const line of lines) {
      const meta = line.startsWith("+++") || line.startsWith("---");
      const cls = meta ? "meta" : line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
      const body = meta || cls === "hunk" ? [line] : [line.slice(0, 1), highlight(line.slice(1), lang)];
      pre.append(h("span", cls ? { class: cls } : {}, body), "\n");
    }
    return pre;
  }
  // Side by side: a hunk's removed lines face the added lines that replace them.
  const rows = [];
  let oldNo = 0, newNo = 0, dels = [], adds = [];
  const cell = (no, text, cls) => [h("td", { class: "ln" }, no ? String(no) : ""), h("td", { class: "src " + (cls || "") }, text === null ? "" : highlight(text, lang))];
  const flush = () => {
    for (let i = 0; i < Math.max(dels.length, adds.length); i++) {
      const d = dels[i], a = adds[i];
      rows.push(h("tr", {}, cell(d ? d[0] : 0, d ? d[1] : null, d ? "del" : "none"), cell(a ? a[0] : 0, a ? a[1] : null, a ? "add" : "none")));
    }
    dels = []; adds = [];
  };
  for (const line of lines) {
    const hunk = line.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/);
    if (hunk) {
      flush();
      oldNo = Number(hunk[1]); newNo = Number(hunk[2]);
      rows.push(h("tr", { class: "hunk" }, h("td", { colspan: 4 }, line)));
    } else if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ") || line.startsWith("index ")) {
      continue;
    } else if (line.startsWith("-")) {
      dels.push([oldNo++, line.slice(1)]);
    } else if (line.startsWith("+")) {
      adds.push([newNo++, line.slice(1)]);
    } else if (!line.startsWith("\\")) {
      flush();
      rows.push(h("tr", {}, cell(oldNo++, line.slice(1)), cell(newNo++, line.slice(1))));
    }
  }
  flush();
  return h("table", { class: "code split", "aria-label": (path || "File") + ", side by side" }, h("tbody", {}, rows));
}

// fileDiffs renders a list of FileDiffs (each folded open) with the layout switch above them.
function fileDiffs(diffs, contentOf) {
  const box = h("div", { class: "file-diffs" });
  const draw = () => fill(box, diffModeSwitch(draw), diffs.map((d, i) => h("details", { class: "file", open: true },
    h("summary", {}, h("code", {}, d.path || ""), d.previous_path ? ` (from ${d.previous_path})` : "", ` ${enumName(d.action, "FILE_ACTION_")} +${d.additions || 0} −${d.deletions || 0}`),
    d.binary ? h("p", { class: "muted" }, "Binary file")
      : d.unified_diff ? diffView(d.unified_diff, d.path)
        : contentOf && contentOf(i) ? codeView(contentOf(i), d.path) : h("p", { class: "muted" }, "No changes to show."))));
  draw();
  return box;
}

async function reviewPage(rawID) {
  const id = decodeURIComponent(rawID);
  const body = h("div", { id: "review" });
  const result = h("div", { id: "review-result", role: "status" });
  const error = h("p", { class: "error", role: "alert" });
  let review = null;
  let job = null;
  let projectTasks = null;
  let projectCost = 0;

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
    // A project's review: the person may name the tasks to run again (none: the agent picks
    // them from the feedback).
    const taskBoxes = (projectTasks || []).map((t) => h("input", { type: "checkbox", name: "redo", value: t.id }));
    const redo = taskBoxes.length ? h("fieldset", { id: "redo-tasks" }, h("legend", {}, "Tasks to run again with the feedback (none ticked: TheFold chooses)"),
      projectTasks.map((t, i) => h("label", { class: "check" }, taskBoxes[i], " " + (t.title || t.id)))) : null;
    const form = decided ? null : h("form", { class: "card", id: "decide", onsubmit: (e) => e.preventDefault() },
      field("Comment or feedback (feedback is required to request changes)", note),
      redo,
      h("div", { class: "actions" },
        h("button", { type: "button", id: "approve", onclick: () => decide("approve", { comment: note.value }) }, "Approve and open the pull request"),
        h("button", { type: "button", id: "request-changes", class: "secondary", onclick: () => decide("requestChanges",
          { feedback: note.value, project_task_ids: taskBoxes.filter((b) => b.checked).map((b) => b.value) }) }, "Request changes"),
        h("button", { type: "button", id: "reject", class: "secondary", onclick: () => { if (window.confirm("Reject this work?")) decide("reject", { reason: note.value }); } }, "Reject")));
    const pr = (r.pull_request && r.pull_request.url) ? r.pull_request : (job && job.pull_request && job.pull_request.url ? job.pull_request : null);
    fill(result, ...(pr ? [h("p", {}, "Pull request: ", h("a", { href: pr.url, class: "pr-link", rel: "noopener noreferrer" }, pr.url))]
      : decided ? [h("p", { class: "muted" }, r.status === "REVIEW_STATUS_APPROVED" ? "Approved: the pull request is being opened…" : "Decided: " + enumName(r.status, "REVIEW_STATUS_"))] : []));
    fill(body, 
      h("dl", { class: "facts" },
        [["Status", enumName(r.status, "REVIEW_STATUS_")], ["Repository", r.repo], ["Quality", r.quality_score ? `${r.quality_score}/10` : ""],
          ["Changes", `${plural(stats.files_changed || (r.files || []).length, "file")}, +${stats.additions || 0} −${stats.deletions || 0}`],
          ["Cost so far", job && job.usage && job.usage.cost_micros ? money(job.usage.cost_micros) : projectCost ? money(projectCost) : ""]]
          .filter(([, v]) => v).map(([k, v]) => [h("dt", {}, k), h("dd", k === "Status" ? { id: "review-status" } : {}, v)])),
      r.job_id ? h("p", {}, h("a", { href: "/jobs/" + encodeURIComponent(r.job_id), "data-nav": true }, "The job")) : null,
      (r.concerns || []).length ? [h("h2", {}, "Concerns"), h("ul", { class: "concerns" }, r.concerns.map((c) =>
        h("li", {}, [c.path ? `${c.path}${c.line ? ":" + c.line : ""}` : "", c.message].filter(Boolean).join(" — "))))] : null,
      r.documentation ? [h("h2", {}, "Notes"), h("pre", { class: "description" }, r.documentation)] : null,
      h("h2", {}, "Files"),
      fileDiffs((r.files || []).map((f) => f.diff || {}), (i) => r.files[i].content),
      form);
  };
  const load = async () => {
    review = (await api("GET", "/v1/reviews/" + encodeURIComponent(id))).review;
    if (review.job_id) job = (await api("GET", "/v1/jobs/" + encodeURIComponent(review.job_id))).job;
    if (review.project_id && projectTasks === null) {
      const p = (await api("GET", "/v1/projects/" + encodeURIComponent(review.project_id))).project || {};
      projectTasks = (p.phases || []).flatMap((ph) => ph.tasks || []);
      projectCost = (p.usage && p.usage.cost_micros) || 0;
    }
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
    (m.attachments || []).map(attachmentView),
    m.incomplete ? h("p", { class: "muted" }, "(the reply stopped early)") : null);
}

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

// attachmentView shows an attachment: an image as a picture (a data: URL of one of four
// image types, which the CSP allows), text folded open on demand — as text, never HTML.
function attachmentView(a) {
  const label = `${a.name || "attachment"} (${a.media_type || "?"}, ${a.size_bytes || 0} bytes)`;
  if (!a.content) return h("p", { class: "attachment muted" }, "📎 " + label);
  if (IMAGE_TYPES.includes(a.media_type)) {
    return h("figure", { class: "attachment" }, h("img", { src: `data:${a.media_type};base64,${a.content}`, alt: a.name || "attached image" }), h("figcaption", { class: "muted" }, label));
  }
  let text = "";
  try { text = new TextDecoder().decode(Uint8Array.from(atob(a.content), (c) => c.charCodeAt(0))); } catch (_) { text = "(not readable as text)"; }
  return h("details", { class: "attachment" }, h("summary", {}, "📎 " + label), h("pre", {}, text));
}

// mediaType names a file's type: by its extension for the source files browsers do not
// know, else as the browser says, else plain text (the API refuses what is neither text
// nor one of its image types).
function mediaType(f) {
  const byExt = { md: "text/markdown", go: "text/x-go", py: "text/x-python", ts: "text/x-typescript", tsx: "text/x-typescript",
    js: "text/javascript", json: "application/json", yaml: "application/yaml", yml: "application/yaml", csv: "text/csv", txt: "text/plain" };
  const ext = f.name.includes(".") ? f.name.split(".").pop().toLowerCase() : "";
  return byExt[ext] || f.type || "text/plain";
}

// readAttachments turns the chosen files into the API's attachments (base64 content).
async function readAttachments(files) {
  return Promise.all([...files].map((f) => new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve({ name: f.name, media_type: mediaType(f), content: String(r.result).replace(/^data:[^,]*,/, "") });
    r.onerror = () => reject(new Error(`Could not read ${f.name}.`));
    r.readAsDataURL(f);
  })));
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

  const text = h("textarea", { name: "message", rows: 3, placeholder: "Ask for a change, e.g. “Add a health endpoint”" });
  const files = h("input", { type: "file", name: "attachments", multiple: true, accept: "text/*,.md,.go,.ts,.js,.py,.json,.yaml,.yml,.csv,image/png,image/jpeg,image/gif,image/webp" });
  const send = h("button", { type: "submit", id: "send" }, "Send");
  const stop = h("button", { type: "button", class: "secondary", id: "stop-reply", hidden: !conv.active_reply_id, onclick: async () => {
    try { await api("POST", `/v1/conversations/${encodeURIComponent(id)}:cancelReply`, {}); } catch (err) { notice(err.message, "error"); }
  } }, "Stop the reply");
  const error = h("p", { class: "error", role: "alert" });
  const compose = h("form", { class: "compose", id: "compose", onsubmit: async (e) => {
    e.preventDefault();
    if (!text.value.trim() && files.files.length === 0) return;
    send.disabled = true;
    error.textContent = "";
    try {
      const attachments = await readAttachments(files.files);
      const r = await api("POST", `/v1/conversations/${encodeURIComponent(id)}/messages`, { request_id: "console-" + crypto.randomUUID(), text: text.value, attachments });
      add(r.message);
      text.value = "";
      files.value = "";
    } catch (err) {
      error.textContent = err.message;
    } finally {
      send.disabled = false;
      text.focus();
    }
  } }, field("Message", text), field("Attach files (up to 4: text up to 256 KiB, images up to 3 MiB)", files), h("div", { class: "actions" }, send, stop), error);
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
    const key = JSON.stringify([p.status, p.status_reason, p.mode, p.max_workers, p.repo, p.branch, usage.cost_micros, p.review_id, p.pull_request]);
    redraw(head, key, () => [
      h("dl", { class: "facts" }, [
        ["Status", enumName(p.status, "PROJECT_STATUS_") + (p.status_reason ? ` — ${p.status_reason}` : ""), "project-status"],
        ["Mode", enumName(p.mode, "PROJECT_MODE_") + (crew && p.max_workers ? `, ${p.max_workers} workers` : "")],
        ["Repository", p.repo + (p.branch ? ` · ${p.branch}` : "")],
        ["Cost", usage.cost_micros ? money(usage.cost_micros) : ""],
      ].filter(([, v]) => v).map(([k, v, elID]) => [h("dt", {}, k), h("dd", elID ? { id: elID } : {}, v)])),
      h("div", { class: "actions" }, actions,
        p.review_id ? h("a", { href: "/reviews/" + encodeURIComponent(p.review_id), "data-nav": true }, "Open the review") : null,
        p.pull_request && p.pull_request.url ? h("a", { href: p.pull_request.url, class: "pr-link", rel: "noopener noreferrer" }, "Pull request") : null)]);
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
    const allTasks = phases.flatMap((x) => x.tasks || []);
    fill(planBox, h("h2", {}, "Plan"), phases.map((ph, pi) => h("section", { class: "phase" },
      h("h3", {}, `Phase ${ph.number || pi + 1}: `, ph.name || ""),
      h("ol", { class: "plan-tasks" }, (ph.tasks || []).map((t, ti) => {
        const status = enumName(t.status, "PROJECT_TASK_STATUS_");
        const links = [
          t.job_id ? h("a", { href: "/jobs/" + encodeURIComponent(t.job_id), "data-nav": true }, "job") : null,
          t.pull_request && t.pull_request.url ? h("a", { href: t.pull_request.url, rel: "noopener noreferrer" }, `PR #${t.pull_request.number || ""}`) : null,
        ].filter(Boolean);
        const titleOf = (d) => (allTasks.find((x) => x.id === d) || {}).title || d;
        if (!editable) {
          return h("li", { "data-task": t.id }, h("strong", {}, t.title), ` — ${status}`, t.worker ? ` (worker ${t.worker})` : "",
            t.depends_on && t.depends_on.length ? h("span", { class: "muted" }, ` after ${t.depends_on.map(titleOf).join(", ")}`) : null,
            links.flatMap((a) => [" · ", a]));
        }
        // The editor changes the copy's task object itself: indexes move when a task is removed.
        const task = phases[pi].tasks[ti];
        const title = h("input", { type: "text", name: "task-title", value: task.title || "", "aria-label": "Task title" });
        const desc = h("textarea", { name: "task-description", rows: 2, "aria-label": "Task description" });
        desc.value = task.description || "";
        title.addEventListener("input", () => { task.title = title.value; changed(); });
        desc.addEventListener("input", () => { task.description = desc.value; changed(); });
        // Dependencies: any other task of the plan (the server refuses a cycle, naming it).
        const others = allTasks.filter((x) => x.id !== task.id);
        const deps = others.length === 0 ? null : h("fieldset", { class: "deps" }, h("legend", {}, "Starts after"),
          others.map((o) => h("label", { class: "check" }, h("input", { type: "checkbox", name: "depends-on", value: o.id, checked: (task.depends_on || []).includes(o.id),
            onchange: (e) => {
              const set = new Set(task.depends_on || []);
              if (e.target.checked) set.add(o.id); else set.delete(o.id);
              task.depends_on = [...set];
              changed();
            } }), " " + (o.title || o.id))));
        const remove = h("button", { type: "button", class: "secondary", onclick: () => {
          for (const ph2 of phases) ph2.tasks = (ph2.tasks || []).filter((x) => x !== task);
          for (const other of phases.flatMap((x) => x.tasks || [])) other.depends_on = (other.depends_on || []).filter((d) => d !== task.id);
          changed();
          li.remove();
          for (const box of planBox.querySelectorAll(`input[name=depends-on][value="${CSS.escape(task.id)}"]`)) box.closest("label").remove();
        } }, "Remove");
        const li = h("li", { class: "card", "data-task": task.id }, field("Title", title), field("Description", desc), deps, remove);
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
  const name = h("input", { type: "text", name: "repo-name", required: true, placeholder: "local/demo" });
  const description = h("input", { type: "text", name: "repo-description" });
  const init = h("input", { type: "checkbox", name: "repo-init", checked: true });
  const error = h("p", { class: "error", role: "alert" });
  const create = h("form", { class: "card", id: "new-repo", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      const c = await api("POST", "/v1/repos", { repo: name.value.trim(), description: description.value.trim(), auto_init: init.checked });
      const made = (c && c.repo && c.repo.repo) || name.value.trim();
      navigate("/repos/" + repoPath(made), { notice: `${made} is created.` });
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("h2", {}, "New repository on the local forge"), field("Name (local/…)", name), field("Description", description),
  h("label", { class: "check" }, init, " Start it with a first commit (a README)"), h("button", { type: "submit" }, "Create the repository"), error);
  show(h("h1", {}, "Repositories"),
    repos.length === 0 ? h("p", { class: "empty" }, "No repositories yet. Create one on the local forge (thefold repos create) or connect GitHub.")
      : h("table", { class: "tasks", id: "repos" }, h("thead", {}, h("tr", {}, ["Repository", "Provider", "Default branch", ""].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, repos.map((x) => {
          const name = x.repo || `${x.owner}/${x.name}`;
          return h("tr", {},
            h("td", {}, h("a", { href: "/repos/" + repoPath(name), "data-nav": true, class: "repo-link" }, name), x.description ? h("span", { class: "muted" }, ` — ${x.description}`) : null),
            h("td", {}, enumName(x.provider, "REPO_PROVIDER_")), h("td", {}, x.default_branch || ""),
            h("td", {}, h("a", { href: "/tasks?repo=" + encodeURIComponent(name), "data-nav": true }, "tasks")));
        }))), create);
}

// plural is "1 file", "2 files".
function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

// repoPath is "owner/name" for a URL path, each part escaped.
function repoPath(repo) {
  return String(repo).split("/").map(encodeURIComponent).join("/");
}

// repoPage is one repository: its files (a folder at a time, a file highlighted), its pull
// requests and its issues (which import into tasks), on tabs kept in the URL.
// healthView is a repository's health tab: its connection (made here when there is none),
// the monitor's settings, a check on demand, and the latest report with its findings and
// the trend.
async function healthView(repo, base) {
  const conns = ((await api("GET", "/v1/repo-connections?page_size=100")) || {}).connections || [];
  const conn = conns.find((c) => c.repo === repo);
  const error = h("p", { class: "error", role: "alert" });
  if (!conn) {
    const enable = h("input", { type: "checkbox", name: "health-enabled", checked: true });
    return h("form", { class: "card", id: "connect-repo", onsubmit: async (e) => {
      e.preventDefault();
      error.textContent = "";
      try {
        const r = await api("POST", "/v1/repo-connections", { repo, request_id: "console-" + crypto.randomUUID(), health: { enabled: enable.checked } });
        const secret = r && r.connection && r.connection.webhook_secret;
        navigate(`${base}?tab=health`, { notice: "Connected." + (secret ? ` The webhook secret, shown once: ${secret}` : "") });
      } catch (err) {
        error.textContent = err.message;
      }
    } }, h("h2", {}, "Connect this repository"),
    h("p", { class: "muted" }, "A connected repository's health can be checked in a sandbox: its build, tests, outdated dependencies, known vulnerabilities and TODO markers. Each new finding files one healing task."),
    h("label", { class: "check" }, enable, " Check its health every day"), h("button", { type: "submit" }, "Connect"), error);
  }
  const health = await api("GET", `/v1/repo-connections/${conn.id}/health`);
  const s = health.settings || {};
  const enabled = h("input", { type: "checkbox", name: "health-enabled", checked: !!s.enabled });
  const autoStart = h("input", { type: "checkbox", name: "health-auto-start", checked: !!s.auto_start });
  const threshold = h("input", { type: "number", name: "todo-threshold", min: 0, value: s.todo_threshold || 200 });
  const hours = h("input", { type: "number", name: "interval-hours", min: 1, max: 720, value: Math.round(parseFloat(s.interval || "86400s") / 3600) });
  const settings = h("form", { class: "card", id: "health-settings", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    try {
      await api("PATCH", `/v1/repo-connections/${conn.id}?update_mask=health`, { health: { enabled: enabled.checked, auto_start: autoStart.checked,
        todo_threshold: Number(threshold.value || 0), interval: `${Number(hours.value || 24) * 3600}s` } });
      navigate(`${base}?tab=health`, { notice: "The monitor's settings are saved." }, true);
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("h2", {}, "Monitor"), h("label", { class: "check" }, enabled, " Check periodically"), field("Every (hours)", hours),
  field("More TODO/FIXME markers than this is a finding", threshold), h("label", { class: "check" }, autoStart, " Start each healing task as it is filed"),
  s.next_check_time && s.enabled ? h("p", { class: "muted" }, "Next check: " + new Date(s.next_check_time).toLocaleString()) : null,
  h("button", { type: "submit" }, "Save"));
  const latest = health.latest;
  const running = latest && ["REPO_HEALTH_STATE_QUEUED", "REPO_HEALTH_STATE_RUNNING"].includes(latest.state);
  // A periodic check whose time has come is queued by the monitor within seconds (the
  // first one as soon as the connection is made): the page looks again until it shows.
  const due = !running && s.enabled && s.next_check_time && Date.parse(s.next_check_time) <= Date.now();
  const check = h("button", { type: "button", id: "check-now", disabled: running, onclick: async () => {
    error.textContent = "";
    try {
      await api("POST", `/v1/repo-connections/${conn.id}/health:check`, { request_id: "console-" + crypto.randomUUID() });
      navigate(`${base}?tab=health`, { notice: "A check is queued; this page shows it when it is done." }, true);
    } catch (err) {
      error.textContent = err.message;
    }
  } }, running ? "A check is under way" : "Check now");
  if (running || due) {
    // Looked at again until the check is done.
    const mine = page;
    setTimeout(() => { if (!mine.signal.aborted) render(); }, 2000);
  }
  const report = !latest ? h("p", { class: "empty" }, "Not checked yet.") : h("section", { id: "health-report" },
    h("h2", {}, "Latest check"),
    h("p", {}, enumName(latest.state, "REPO_HEALTH_STATE_"), latest.commit ? [" at ", h("code", {}, latest.commit.slice(0, 12))] : null,
      latest.finish_time ? " · " + new Date(latest.finish_time).toLocaleString() : null),
    latest.error ? h("p", { class: "error" }, latest.error) : null,
    (latest.checks || []).length === 0 ? null : h("table", { class: "tasks", id: "health-checks" },
      h("thead", {}, h("tr", {}, ["Part", "Status", "What it found"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, latest.checks.map((c) => h("tr", { "data-part": c.name }, h("td", {}, c.name),
        h("td", { class: "status" }, enumName(c.status, "REPO_HEALTH_CHECK_STATUS_")),
        h("td", {}, c.summary || "", c.output ? h("details", {}, h("summary", {}, "Output"), h("pre", { class: "description" }, c.output)) : null))))),
    (latest.outdated || []).length === 0 ? null : h("details", { id: "outdated" }, h("summary", {}, `${latest.outdated.length} ${latest.outdated.length === 1 ? "dependency" : "dependencies"} with a newer release`),
      h("ul", {}, latest.outdated.map((d) => h("li", {}, `${d.ecosystem} ${d.name} ${d.version} → ${d.latest}${d.direct ? "" : " (indirect)"}`)))),
    (latest.vulnerabilities || []).length === 0 ? null : h("details", { id: "vulnerabilities", open: latest.vulnerabilities.some((v) => v.called) },
      h("summary", {}, `${latest.vulnerabilities.length} known ${latest.vulnerabilities.length === 1 ? "vulnerability" : "vulnerabilities"}`),
      h("ul", {}, latest.vulnerabilities.map((v) => h("li", { "data-vuln": v.id, class: v.called ? "called" : "" },
        v.url ? h("a", { href: v.url, rel: "noopener noreferrer", target: "_blank" }, v.id) : v.id,
        (v.aliases || []).length ? ` (${v.aliases.join(", ")})` : "", ` ${v.module} ${v.version}`,
        v.fixed_version ? ` → ${v.fixed_version}` : " (no fix yet)", v.summary ? ` — ${v.summary}` : "",
        v.called ? h("strong", {}, ` called: ${v.function}${v.position ? " from " + v.position : ""}`) : h("span", { class: "muted" }, " not called"))))));
  const findings = health.open_findings || [];
  const open = h("section", { id: "health-findings" }, h("h2", {}, "Open findings"), findings.length === 0 ? h("p", { class: "empty" }, "None.")
    : h("ul", {}, findings.map((f) => h("li", {}, f.title || f.key, " — ",
      f.task_id ? h("a", { href: "/tasks/" + f.task_id, "data-nav": true }, "its healing task") : h("span", { class: "muted" }, f.task_error || "no task yet")))));
  const trend = health.trend || [];
  const history = trend.length === 0 ? null : h("section", { id: "health-trend" }, h("h2", {}, "Trend"),
    h("table", { class: "tasks" }, h("thead", {}, h("tr", {}, ["When", "State", "Failed parts", "Outdated", "Vulnerable calls", "Markers (stale)", "Findings"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, trend.map((p) => h("tr", {}, h("td", {}, p.finish_time ? new Date(p.finish_time).toLocaleString() : ""),
        h("td", {}, enumName(p.state, "REPO_HEALTH_STATE_")), h("td", {}, String(p.failed_checks || 0)), h("td", {}, String(p.outdated_count || 0)),
        h("td", {}, String(p.vulnerability_count || 0)), h("td", {}, `${p.todo_count || 0} (${p.stale_todo_count || 0})`), h("td", {}, String(p.finding_count || 0)))))));
  return [h("p", {}, check, due ? h("span", { class: "muted", id: "check-due" }, " A periodic check is due: it starts within seconds.") : null),
    error, report, open, history, settings];
}

async function repoPage(owner, name) {
  const repo = `${decodeURIComponent(owner)}/${decodeURIComponent(name)}`;
  const params = new URLSearchParams(location.search);
  const tab = ["files", "pulls", "issues", "health"].includes(params.get("tab")) ? params.get("tab") : "files";
  const base = "/repos/" + repoPath(repo);
  const info = (await api("GET", `/v1/repos/${repoPath(repo)}`)).repo || {};
  const tabs = h("nav", { class: "views tabs-nav", "aria-label": "Repository" }, [["files", "Files"], ["pulls", "Pull requests"], ["issues", "Issues"], ["health", "Health"]]
    .flatMap(([t, label], i) => [i ? " · " : "", t === tab ? h("strong", { "aria-current": "page" }, label) : h("a", { href: `${base}?tab=${t}`, "data-nav": true, id: "tab-" + t }, label)]));
  const headline = [h("p", {}, h("a", { href: "/repos", "data-nav": true }, "← Repositories")), h("h1", {}, repo),
    info.description ? h("p", { class: "muted" }, info.description) : null, tabs];
  if (tab === "pulls") {
    const list = await api("GET", `/v1/repos/${repoPath(repo)}/pulls?page_size=100`);
    const pulls = (list && list.pull_requests) || [];
    show(headline, pulls.length === 0 ? h("p", { class: "empty" }, "No pull requests. TheFold opens one when a review is approved.")
      : h("table", { class: "tasks", id: "pulls" }, h("thead", {}, h("tr", {}, ["#", "Title", "Branches", "State", "Changes"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, pulls.map((pr) => h("tr", {}, h("td", {}, String(pr.number)),
          h("td", {}, h("a", { href: `${base}/pulls/${pr.number}`, "data-nav": true, class: "pr-title" }, pr.title || "")),
          h("td", {}, h("code", {}, pr.head || ""), " → ", h("code", {}, pr.base || "")),
          h("td", {}, enumName(pr.state, "PULL_REQUEST_STATE_") + (pr.draft ? " (draft)" : "")),
          h("td", {}, pr.stats ? `${plural(pr.stats.files_changed || 0, "file")}, +${pr.stats.additions || 0} −${pr.stats.deletions || 0}` : ""))))));
    return;
  }
  if (tab === "health") {
    show(headline, await healthView(repo, base));
    return;
  }
  if (tab === "issues") {
    const list = await api("GET", `/v1/repos/${repoPath(repo)}/issues?page_size=100&state=ISSUE_STATE_OPEN`);
    const issues = (list && list.issues) || [];
    const labels = h("input", { type: "text", name: "labels", placeholder: "e.g. thefold, bug (optional)" });
    const result = h("div", { id: "import-result", role: "status" });
    const error = h("p", { class: "error", role: "alert" });
    const importForm = h("form", { class: "card", id: "import-issues", onsubmit: async (e) => {
      e.preventDefault();
      error.textContent = "";
      const button = importForm.querySelector("button");
      button.disabled = true;
      try {
        const r = await api("POST", "/v1/tasks:importIssues", { repo, labels: commaList(labels.value) });
        const created = (r && r.created) || [], updated = (r && r.updated) || [];
        fill(result, h("p", {}, `${created.length} task${created.length === 1 ? "" : "s"} created, ${updated.length} updated, ${(r && r.skipped) || 0} unchanged. `,
          h("a", { href: "/tasks?repo=" + encodeURIComponent(repo), "data-nav": true }, "The repository's tasks"), " · ",
          h("a", { href: "/tasks?view=graph&repo=" + encodeURIComponent(repo), "data-nav": true }, "their graph")));
      } catch (err) {
        error.textContent = err.message;
      } finally {
        button.disabled = false;
      }
    } }, h("h2", {}, "Import issues as tasks"),
    h("p", { class: "muted" }, "Open issues become tasks (blocked-by links kept); importing again updates them."),
    field("Only issues with all of these labels (comma-separated)", labels), h("button", { type: "submit" }, "Import"), result, error);
    show(headline, issues.length === 0 ? h("p", { class: "empty" }, "No open issues.")
      : h("table", { class: "tasks", id: "issues" }, h("thead", {}, h("tr", {}, ["#", "Title", "Labels", "Blocked by"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, issues.map((is) => h("tr", {}, h("td", {}, String(is.number)),
          h("td", {}, h("details", {}, h("summary", { class: "issue-title" }, is.title || ""), is.body ? h("pre", { class: "description" }, is.body) : h("p", { class: "muted" }, "No description."))),
          h("td", {}, (is.labels || []).join(", ")), h("td", {}, (is.blocked_by || []).map((n) => "#" + n).join(", ")))))),
    importForm);
    return;
  }
  // Files: the folder at ?path, or the file at ?file; a file written (or changed) in one
  // commit on the default branch.
  const fileForm = (path, content, change) => {
    const fpath = h("input", { type: "text", name: "file-path", required: true, value: path || "", placeholder: "e.g. go.mod" });
    const fcontent = h("textarea", { name: "file-content", rows: 8, class: "code-input" });
    fcontent.value = content || "";
    const fmessage = h("input", { type: "text", name: "file-message", placeholder: "what the commit does" });
    const ferror = h("p", { class: "error", role: "alert" });
    return h("details", { class: "edit" }, h("summary", {}, change ? "Change this file" : "Add a file"),
      h("form", { class: "card", id: "commit-file", onsubmit: async (e) => {
        e.preventDefault();
        ferror.textContent = "";
        const p = fpath.value.trim().replace(/^\/+/, "");
        try {
          const have = await api("GET", `/v1/repos/${repoPath(repo)}/files?paths=${encodeURIComponent(p)}`);
          const exists = ((have && have.files) || []).length > 0;
          await api("POST", `/v1/repos/${repoPath(repo)}/commits`, { branch: info.default_branch || "main", request_id: "console-" + crypto.randomUUID(),
            message: fmessage.value.trim() || `${exists ? "Change" : "Add"} ${p}`,
            files: [{ path: p, action: exists ? "FILE_ACTION_MODIFY" : "FILE_ACTION_CREATE", content: fcontent.value }] });
          navigate(`${base}?tab=files&file=${encodeURIComponent(p)}`, { notice: `${p} is committed.` });
        } catch (err) {
          ferror.textContent = err.message;
        }
      } }, field("Path", fpath), field("Content", fcontent), field("Commit message", fmessage), h("button", { type: "submit" }, "Commit"), ferror));
  };
  const local = info.provider !== "REPO_PROVIDER_GITHUB";
  const file = params.get("file");
  if (file) {
    const r = await api("GET", `/v1/repos/${repoPath(repo)}/files?paths=${encodeURIComponent(file)}`);
    const f = ((r && r.files) || [])[0];
    const parent = file.includes("/") ? file.slice(0, file.lastIndexOf("/")) : "";
    show(headline, h("p", {}, h("a", { href: `${base}?tab=files${parent ? "&path=" + encodeURIComponent(parent) : ""}`, "data-nav": true }, "← " + (parent || "Files"))),
      h("h2", {}, h("code", {}, file)),
      !f ? h("p", { class: "empty" }, "No such file on the default branch.") : h("div", { class: "file-view", id: "file-view" }, codeView(f.content || "", file)),
      f && local ? fileForm(file, f.content || "", true) : null);
    return;
  }
  const dir = (params.get("path") || "").replace(/^\/+|\/+$/g, "");
  const tree = await api("GET", `/v1/repos/${repoPath(repo)}/tree?page_size=1000${dir ? "&path_prefix=" + encodeURIComponent(dir) : ""}`);
  // The tree lists paths below dir at any depth: a folder is the first part of a longer one.
  const children = new Map();
  for (const e of (tree && tree.entries) || []) {
    const rest = dir ? e.path.slice(dir.length + 1) : e.path;
    if (!rest || (dir && !e.path.startsWith(dir + "/"))) continue;
    const first = rest.split("/")[0];
    const isDir = rest.includes("/") || e.type === "TREE_ENTRY_TYPE_DIRECTORY";
    if (!children.has(first) || isDir) children.set(first, { name: first, dir: isDir, size: e.size });
  }
  const rows = [...children.values()].sort((a, b) => (a.dir === b.dir ? a.name.localeCompare(b.name) : a.dir ? -1 : 1));
  const full = (n) => (dir ? dir + "/" : "") + n;
  show(headline,
    h("p", { class: "muted", id: "tree-path" }, dir ? ["/ ", dir.split("/").flatMap((part, i, all) => [i ? " / " : "",
      i === all.length - 1 ? part : h("a", { href: `${base}?tab=files&path=${encodeURIComponent(all.slice(0, i + 1).join("/"))}`, "data-nav": true }, part)])] : "The default branch" + (info.default_branch ? ` (${info.default_branch})` : "")),
    tree && tree.empty ? h("p", { class: "empty" }, "The repository is empty.")
      : h("table", { class: "tasks", id: "tree" }, h("thead", {}, h("tr", {}, ["Name", "Size"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, dir ? h("tr", {}, h("td", {}, h("a", { href: `${base}?tab=files${dir.includes("/") ? "&path=" + encodeURIComponent(dir.slice(0, dir.lastIndexOf("/"))) : ""}`, "data-nav": true }, "..")), h("td", {})) : null,
          rows.map((c) => h("tr", {},
            h("td", {}, h("a", { href: `${base}?tab=files&${c.dir ? "path" : "file"}=${encodeURIComponent(full(c.name))}`, "data-nav": true, class: c.dir ? "tree-dir" : "tree-file" }, c.name + (c.dir ? "/" : ""))),
            h("td", {}, c.dir ? "" : `${c.size || 0} B`))))),
    tree && tree.next_page_token ? h("p", { class: "muted" }, "The folder has more entries than are shown; open a subfolder.") : null,
    local ? fileForm(dir ? dir + "/" : "", "", false) : null);
}

// pullRequestPage is one pull request with its diff.
async function pullRequestPage(owner, name, number) {
  const repo = `${decodeURIComponent(owner)}/${decodeURIComponent(name)}`;
  const [prR, diff] = await Promise.all([
    api("GET", `/v1/repos/${repoPath(repo)}/pulls/${encodeURIComponent(number)}`),
    api("GET", `/v1/repos/${repoPath(repo)}/pulls/${encodeURIComponent(number)}/diff?page_size=200`)]);
  const pr = (prR && prR.pull_request) || {};
  const stats = (diff && diff.stats) || pr.stats || {};
  show(h("p", {}, h("a", { href: `/repos/${repoPath(repo)}?tab=pulls`, "data-nav": true }, "← " + repo + " pull requests")),
    h("h1", {}, `#${pr.number} ${pr.title || ""}`),
    h("dl", { class: "facts", id: "pr-facts" }, [["State", enumName(pr.state, "PULL_REQUEST_STATE_") + (pr.draft ? " (draft)" : "")],
      ["Branches", `${pr.head || ""} → ${pr.base || ""}`], ["Author", pr.author || ""], ["Changes", `${plural(stats.files_changed || 0, "file")}, +${stats.additions || 0} −${stats.deletions || 0}`],
      ["Merged as", pr.merge_commit_sha || ""]].filter(([, v]) => v).map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    /^https?:\/\//.test(pr.url || "") ? h("p", {}, h("a", { href: pr.url, rel: "noopener noreferrer" }, "Open on the forge")) : null,
    pr.body ? h("pre", { class: "description" }, pr.body) : null,
    h("h2", {}, "Files"),
    fileDiffs((diff && diff.files) || []),
    diff && diff.next_page_token ? h("p", { class: "muted" }, "More files changed than are shown here.") : null);
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
  const [prefs, integrations, models] = await Promise.all([api("GET", "/v1/preferences"), api("GET", "/v1/integrations"),
    api("GET", "/v1/ai/models?page_size=200&enabled_only=true").catch(() => ({ models: [] }))]);
  show(h("h1", {}, "Settings"),
    preferencesForm((prefs && prefs.preferences) || {}, (models && models.models) || []),
    h("h2", {}, "API keys"),
    keys.length === 0 ? h("p", { class: "empty" }, "No API keys. Create one for a tool or a script; it acts as you, within its scopes.")
      : h("table", { class: "tasks", id: "keys" }, h("thead", {}, h("tr", {}, ["Name", "Prefix", "Scopes", "State", ""].map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)),
    secretBox, form,
    integrationsSection((integrations && integrations.integrations) || []));
}

const BUDGET_MODES = ["BALANCED", "QUALITY_FIRST", "AGGRESSIVE_SAVE"].map((x) => "BUDGET_MODE_" + x);
const PURPOSES = [["planning", "Planning"], ["coding", "Coding"], ["review", "Review"], ["chat", "Chat"]];
const NOTIFY = [["review_ready", "A review is ready"], ["job_completed", "A job completed"], ["job_failed", "A job failed or needs me"], ["clarification", "A job asks a question"]];

// preferencesForm: budget mode, sub-agents, the model per purpose, a job's default caps and
// which notices reach the integrations — saved together as one PATCH of what changed.
function preferencesForm(p, models) {
  const budget = select("budget-mode", BUDGET_MODES, p.budget_mode && p.budget_mode !== "BUDGET_MODE_UNSPECIFIED" ? p.budget_mode : "BUDGET_MODE_BALANCED", (v) => enumName(v, "BUDGET_MODE_"));
  const subAgents = h("input", { type: "checkbox", name: "sub-agents", checked: !!p.sub_agents_enabled });
  const merge = select("sub-agent-merge", ["MERGE_STRATEGY_CONCATENATE", "MERGE_STRATEGY_AI_MERGE"], p.sub_agent_merge === "MERGE_STRATEGY_AI_MERGE" ? "MERGE_STRATEGY_AI_MERGE" : "MERGE_STRATEGY_CONCATENATE",
    (v) => (v === "MERGE_STRATEGY_AI_MERGE" ? "merged by a model" : "one section per role"));
  const defaults = p.default_models || {};
  const modelSelects = PURPOSES.map(([k]) => h("select", { name: "model-" + k },
    h("option", { value: "" }, "automatic"), models.map((m) => h("option", { value: m.id, selected: defaults[k] === m.id }, m.display_name || m.name))));
  const budgetCost = h("input", { type: "number", name: "max-cost", min: 0, step: "0.01", placeholder: "USD (empty: no cap)",
    value: p.job_budget && p.job_budget.max_cost_micros ? Number(p.job_budget.max_cost_micros) / 1e6 : "" });
  const n = p.notifications || {};
  const notify = NOTIFY.map(([k]) => h("input", { type: "checkbox", name: "notify-" + k, checked: !!n[k] }));
  const error = h("p", { class: "error", role: "alert" });
  return h("form", { class: "card", id: "preferences", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body = {
      budget_mode: budget.value, sub_agents_enabled: subAgents.checked, sub_agent_merge: merge.value,
      default_models: Object.fromEntries(PURPOSES.map(([k], i) => [k, modelSelects[i].value])),
      job_budget: { max_cost_micros: String(Math.round(Number(budgetCost.value || 0) * 1e6)) },
      notifications: Object.fromEntries(NOTIFY.map(([k], i) => [k, notify[i].checked])),
    };
    const mask = ["budget_mode", "sub_agents_enabled", "sub_agent_merge", ...PURPOSES.map(([k]) => "default_models." + k),
      "job_budget.max_cost_micros", ...NOTIFY.map(([k]) => "notifications." + k)].join(",");
    try {
      await api("PATCH", "/v1/preferences?update_mask=" + mask, body);
      notice("Your preferences are saved.");
    } catch (err) {
      error.textContent = err.message;
    }
  } }, h("h2", {}, "Preferences"),
  field("Budget mode", budget),
  h("label", { class: "check" }, subAgents, " Use sub-agents for complex tasks (complexity 5 and above)"),
  field("Sub-agents' outputs", merge),
  h("fieldset", {}, h("legend", {}, "Model per purpose"), PURPOSES.map(([, label], i) => field(label, modelSelects[i]))),
  field("A job's cost cap when it names none", budgetCost),
  h("fieldset", {}, h("legend", {}, "Notify my integrations when"), NOTIFY.map(([, label], i) => h("label", { class: "check" }, notify[i], " " + label))),
  h("button", { type: "submit" }, "Save the preferences"), error);
}

// integrationsSection lists the person's Slack and Discord webhooks: add one, test it, remove it.
function integrationsSection(items) {
  const error = h("p", { class: "error", role: "alert" });
  const result = h("div", { id: "integration-result", role: "status" });
  const kind = select("integration-kind", ["INTEGRATION_KIND_SLACK", "INTEGRATION_KIND_DISCORD"], "INTEGRATION_KIND_SLACK", (v) => enumName(v, "INTEGRATION_KIND_"));
  const name = h("input", { type: "text", name: "integration-name", required: true, maxlength: 100, placeholder: "e.g. team channel" });
  const url = h("input", { type: "url", name: "integration-url", required: true, placeholder: "https://hooks.slack.com/services/…" });
  const external = h("input", { type: "text", name: "integration-user", placeholder: "your user id there (optional, for messages back)" });
  const secret = h("input", { type: "password", name: "integration-secret", autocomplete: "off", placeholder: "signing secret or public key (optional)" });
  const again = async (msg) => { await settingsPage(); notice(msg); };
  const rows = items.map((it) => h("tr", { "data-integration": it.name },
    h("td", {}, it.name), h("td", {}, enumName(it.kind, "INTEGRATION_KIND_")), h("td", {}, h("code", {}, it.webhook_hint || "")),
    h("td", {}, it.enabled === false ? `off — ${it.disabled_reason || "deliveries failed"}` : "on"),
    h("td", {}, h("div", { class: "actions" },
      h("button", { type: "button", class: "secondary", onclick: async (e) => {
        e.target.disabled = true;
        try {
          const r = await api("POST", `/v1/integrations/${encodeURIComponent(it.id)}:test`, {});
          fill(result, h("p", { class: r.delivered ? "" : "error" }, r.delivered ? `The test message reached ${it.name}.`
            : `The test message did not arrive: ${r.error || "HTTP " + r.http_status}.`));
        } catch (err) { error.textContent = err.message; }
        e.target.disabled = false;
      } }, "Send a test"),
      h("button", { type: "button", class: "secondary", onclick: async () => {
        if (!window.confirm(`Remove the integration "${it.name}"?`)) return;
        try { await api("DELETE", `/v1/integrations/${encodeURIComponent(it.id)}`); await again(`${it.name} is removed.`); } catch (err) { error.textContent = err.message; }
      } }, "Remove")))));
  return h("section", { id: "integrations" }, h("h2", {}, "Slack and Discord"),
    h("p", { class: "muted" }, "Notices of your jobs go to these webhooks; with your user id and the app's secret, your messages there reach TheFold's chat."),
    items.length === 0 ? h("p", { class: "empty" }, "No integrations.")
      : h("table", { class: "tasks" }, h("thead", {}, h("tr", {}, ["Name", "Kind", "Webhook", "State", ""].map((c) => h("th", { scope: "col" }, c)))), h("tbody", {}, rows)),
    result,
    h("form", { class: "card", id: "new-integration", onsubmit: async (e) => {
      e.preventDefault();
      error.textContent = "";
      try {
        await api("POST", "/v1/integrations", { request_id: "console-" + crypto.randomUUID(), integration: {
          kind: kind.value, name: name.value.trim(), webhook_url: url.value.trim(), external_user_id: external.value.trim(), inbound_secret: secret.value } });
        await again(`${name.value.trim()} is added.`);
      } catch (err) { error.textContent = err.message; }
    } }, h("h2", {}, "Add an integration"), field("Kind", kind), field("Name", name), field("Incoming webhook URL", url),
    field("Your user id there", external), field("Secret (stored encrypted, never shown again)", secret), h("button", { type: "submit" }, "Add")),
    error);
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
  const [byDay, byModel, byJob] = await Promise.all([api("GET", q("USAGE_GROUP_BY_DAY")), api("GET", q("USAGE_GROUP_BY_MODEL")), api("GET", q("USAGE_GROUP_BY_JOB"))]);
  const jobRows = ((byJob && byJob.rows) || []).filter((r) => r.job_id).sort((a, b) => Number(b.cost_micros || 0) - Number(a.cost_micros || 0)).slice(0, 50);
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
        h("td", {}, String(r.calls || 0)), h("td", {}, String(r.input_tokens || 0)), h("td", {}, String(r.output_tokens || 0)), h("td", {}, money(r.cost_micros)))))),
    h("h2", {}, "Per job"),
    jobRows.length === 0 ? h("p", { class: "empty" }, "No job made model calls in this period.")
      : h("table", { class: "tasks", id: "usage-jobs" }, h("caption", {}, "The costliest jobs first"),
        h("thead", {}, h("tr", {}, ["Job", "Calls", "Tokens in", "Tokens out", "Cost"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, jobRows.map((r) => h("tr", {}, h("td", {}, h("a", { href: "/jobs/" + encodeURIComponent(r.job_id), "data-nav": true }, r.job_id.slice(0, 8))),
          h("td", {}, String(r.calls || 0)), h("td", {}, String(r.input_tokens || 0)), h("td", {}, String(r.output_tokens || 0)), h("td", {}, money(r.cost_micros)))))));
}

function isAdmin() {
  return !!(session.user && session.user.role === "ROLE_ADMIN");
}

// list splits a comma-separated field into its trimmed, non-empty parts.
function commaList(v) {
  return String(v || "").split(",").map((x) => x.trim()).filter(Boolean);
}

function select(name, values, current, label) {
  return h("select", { name }, values.map((v) => h("option", { value: v, selected: v === current }, label ? label(v) : v)));
}

const SKILL_CATEGORIES = ["GENERAL", "FRAMEWORK", "LANGUAGE", "SECURITY", "STYLE", "QUALITY"].map((x) => "SKILL_CATEGORY_" + x);
const SKILL_PHASES = ["INJECT", "PRE_RUN", "POST_RUN"].map((x) => "SKILL_PHASE_" + x);

// skillForm edits a skill (or makes one when skill is null): admins only, as the API says.
function skillForm(skill, onDone) {
  const k = skill || { phase: "SKILL_PHASE_INJECT", category: "SKILL_CATEGORY_GENERAL", priority: 50, enabled: true, routing: {} };
  const rt = k.routing || {};
  const f = {
    name: h("input", { type: "text", name: "skill-name", required: true, maxlength: 100, value: k.name || "" }),
    description: h("input", { type: "text", name: "skill-description", value: k.description || "" }),
    category: select("skill-category", SKILL_CATEGORIES, k.category, (v) => enumName(v, "SKILL_CATEGORY_")),
    phase: select("skill-phase", SKILL_PHASES, k.phase, (v) => enumName(v, "SKILL_PHASE_")),
    prompt: h("textarea", { name: "skill-prompt", rows: 6 }, k.prompt_fragment || ""),
    keywords: h("input", { type: "text", name: "skill-keywords", value: (rt.keywords || []).join(", ") }),
    languages: h("input", { type: "text", name: "skill-languages", value: (rt.languages || []).join(", ") }),
    globs: h("input", { type: "text", name: "skill-globs", value: (rt.file_globs || []).join(", ") }),
    priority: h("input", { type: "number", name: "skill-priority", min: 1, max: 100, value: k.priority || 50 }),
    repo: h("input", { type: "text", name: "skill-repo", placeholder: "owner/name: only this repository (optional)", value: k.repo || "" }),
    enabled: h("input", { type: "checkbox", name: "skill-enabled", checked: k.enabled !== false }),
  };
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "card skill-form", onsubmit: async (e) => {
    e.preventDefault();
    error.textContent = "";
    const body = {
      name: f.name.value.trim(), description: f.description.value.trim(), category: f.category.value, phase: f.phase.value,
      prompt_fragment: f.prompt.value, priority: Number(f.priority.value) || 50, enabled: f.enabled.checked,
      scope: f.repo.value.trim() ? "SKILL_SCOPE_REPO" : "SKILL_SCOPE_GLOBAL", repo: f.repo.value.trim(),
      routing: { keywords: commaList(f.keywords.value), languages: commaList(f.languages.value), file_globs: commaList(f.globs.value),
        repos: rt.repos || [], labels: rt.labels || [] },
    };
    try {
      if (skill) {
        // The version read makes a concurrent edit ABORTED instead of overwritten.
        const mask = "name,description,category,phase,prompt_fragment,priority,enabled,scope,repo,routing";
        await api("PATCH", `/v1/skills/${encodeURIComponent(skill.id)}?update_mask=${mask}`, { ...body, version: skill.version });
      } else {
        await api("POST", "/v1/skills", { skill: body });
      }
      await onDone(skill ? `The skill "${body.name}" is saved.` : `The skill "${body.name}" is created.`);
    } catch (err) {
      error.textContent = err instanceof ApiError && err.status === 409 ? "Someone changed this skill meanwhile: reload to see their version." : err.message;
    }
  } }, field("Name", f.name), field("Description", f.description), field("Category", f.category), field("Phase", f.phase),
  field("Prompt fragment (INJECT: added to the system prompt)", f.prompt),
  field("Applies when the task mentions any of (comma-separated)", f.keywords), field("…or involves any of these languages", f.languages),
  field("…or touches files matching any of these globs", f.globs), field("Priority (1–100)", f.priority), field("Repository", f.repo),
  h("label", { class: "check" }, f.enabled, " Enabled"),
  h("div", { class: "actions" }, h("button", { type: "submit" }, skill ? "Save the skill" : "Create the skill"),
    skill ? h("button", { type: "button", class: "secondary", onclick: async () => {
      if (!window.confirm(`Delete the skill "${skill.name}"?`)) return;
      try { await api("DELETE", `/v1/skills/${encodeURIComponent(skill.id)}`); await onDone(`The skill "${skill.name}" is deleted.`); } catch (err) { error.textContent = err.message; }
    } }, "Delete") : null), error);
  return form;
}

async function skillsPage() {
  const r = await api("GET", "/v1/skills?page_size=200");
  const skills = (r && r.skills) || [];
  const admin = isAdmin();
  const done = async (msg) => { await skillsPage(); notice(msg); };
  show(h("h1", {}, "Skills"),
    h("p", { class: "muted" }, "Skills are guidance the models get for matching tasks." + (admin ? "" : " Admins edit them.")),
    skills.length === 0 ? h("p", { class: "empty" }, admin ? "No skills. Create the first below." : "No skills.")
      : h("table", { class: "tasks", id: "skills" }, h("thead", {}, h("tr", {}, ["Skill", "Category", "Phase", "Scope", "Enabled", "Confidence"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, skills.map((k) => h("tr", { "data-skill": k.name || "" },
          h("td", {}, h("details", {}, h("summary", {}, k.name || k.id), k.description ? h("p", {}, k.description) : null,
            admin ? skillForm(k, done) : h("pre", { class: "description" }, k.prompt_fragment || ""))),
          h("td", {}, enumName(k.category, "SKILL_CATEGORY_")), h("td", {}, enumName(k.phase, "SKILL_PHASE_")),
          h("td", {}, enumName(k.scope, "SKILL_SCOPE_") + (k.repo ? ` (${k.repo})` : "")),
          h("td", {}, k.enabled ? "yes" : "no"), h("td", {}, k.confidence ? Number(k.confidence).toFixed(2) : ""))))),
    admin ? [h("h2", {}, "New skill"), h("div", { id: "new-skill" }, skillForm(null, done))] : null);
}

// --- models and providers (admins) ---

const PROVIDER_KINDS = ["ANTHROPIC", "OPENAI", "GEMINI", "OPENAI_COMPATIBLE"].map((x) => "PROVIDER_KIND_" + x);

async function modelsPage() {
  const r = await api("GET", "/v1/ai/providers?page_size=100");
  const providers = (r && r.providers) || [];
  const admin = isAdmin();
  const error = h("p", { class: "error", role: "alert" });
  const reload = async (msg) => { await modelsPage(); if (msg) notice(msg); };
  const patch = async (path, body, mask, msg) => {
    error.textContent = "";
    try { await api("PATCH", `${path}?update_mask=${mask}`, body); await reload(msg); } catch (err) { error.textContent = err.message; }
  };
  const perMtok = (v) => (v ? money(v) : "—");
  const providerBlock = (p) => h("section", { class: "card wide", "data-provider": p.name },
    h("h2", {}, p.name, h("span", { class: "muted" }, ` · ${enumName(p.kind, "PROVIDER_KIND_")}`)),
    h("p", { class: "muted" }, [p.base_url || "the kind's public endpoint", " · key ", p.api_key_ref ? h("code", {}, p.api_key_ref) : "not set",
      p.api_key_configured ? " (found)" : " (not found: its models cannot be called)"]),
    admin ? h("label", { class: "check" }, h("input", { type: "checkbox", name: "provider-enabled", checked: !!p.enabled,
      onchange: (e) => patch(`/v1/ai/providers/${encodeURIComponent(p.id)}`, { enabled: e.target.checked }, "enabled", `${p.name} is ${e.target.checked ? "enabled" : "disabled"}.`) }), " Enabled")
      : h("p", {}, p.enabled ? "Enabled" : "Disabled"),
    (p.models || []).length === 0 ? h("p", { class: "empty" }, "No models.")
      : h("table", { class: "tasks models" }, h("thead", {}, h("tr", {}, ["Model", "Tier", "Input / Mtok", "Output / Mtok", "Context", "Enabled"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, p.models.map((m) => h("tr", { "data-model": m.name },
          h("td", {}, m.display_name || m.name, m.display_name ? h("span", { class: "muted" }, ` (${m.name})`) : null),
          h("td", {}, admin ? h("input", { type: "number", min: 1, max: 5, value: m.tier || 1, "aria-label": `Tier of ${m.name}`, class: "narrow",
            onchange: (e) => patch(`/v1/ai/models/${encodeURIComponent(m.id)}`, { tier: Number(e.target.value) }, "tier", `${m.name} is tier ${e.target.value}.`) }) : String(m.tier || "")),
          h("td", {}, perMtok(m.input_micros_per_mtok)), h("td", {}, perMtok(m.output_micros_per_mtok)),
          h("td", {}, m.context_window ? String(m.context_window) : ""),
          h("td", {}, admin ? h("input", { type: "checkbox", checked: !!m.enabled, "aria-label": `${m.name} enabled`,
            onchange: (e) => patch(`/v1/ai/models/${encodeURIComponent(m.id)}`, { enabled: e.target.checked }, "enabled", `${m.name} is ${e.target.checked ? "enabled" : "disabled"}.`) }) : (m.enabled ? "yes" : "no")))))));
  let forms = null;
  if (admin) {
    const pName = h("input", { type: "text", name: "provider-name", required: true, placeholder: "e.g. ollama" });
    const pKind = select("provider-kind", PROVIDER_KINDS, "PROVIDER_KIND_OPENAI_COMPATIBLE", (v) => enumName(v, "PROVIDER_KIND_"));
    const pURL = h("input", { type: "url", name: "provider-url", placeholder: "https://… (empty: the kind's public endpoint)" });
    const pKey = h("input", { type: "text", name: "provider-key", placeholder: "env:NAME — where the key lives, never the key" });
    const mProvider = select("model-provider", providers.map((p) => p.id), "", (id) => (providers.find((p) => p.id === id) || {}).name || id);
    const mName = h("input", { type: "text", name: "model-name", required: true, placeholder: "the provider's model id" });
    const mTier = h("input", { type: "number", name: "model-tier", min: 1, max: 5, value: 2 });
    const mIn = h("input", { type: "number", name: "model-input", min: 0, step: "0.01", placeholder: "USD" });
    const mOut = h("input", { type: "number", name: "model-output", min: 0, step: "0.01", placeholder: "USD" });
    const mCtx = h("input", { type: "number", name: "model-context", min: 0, placeholder: "tokens" });
    const create = (path, body, msg) => async (e) => {
      e.preventDefault();
      error.textContent = "";
      try { await api("POST", path, body()); await reload(msg()); } catch (err) { error.textContent = err.message; }
    };
    forms = [
      h("form", { class: "card", id: "new-provider", onsubmit: create("/v1/ai/providers",
        () => ({ name: pName.value.trim(), kind: pKind.value, base_url: pURL.value.trim(), api_key_ref: pKey.value.trim(), enabled: true }), () => `The provider ${pName.value.trim()} is added.`) },
      h("h2", {}, "Add a provider"), field("Name", pName), field("Kind", pKind), field("Base URL", pURL), field("API key reference", pKey), h("button", { type: "submit" }, "Add the provider")),
      providers.length ? h("form", { class: "card", id: "new-model", onsubmit: create("/v1/ai/models",
        () => ({ provider_id: mProvider.value, name: mName.value.trim(), tier: Number(mTier.value) || 2, enabled: true,
          input_micros_per_mtok: Math.round(Number(mIn.value || 0) * 1e6), output_micros_per_mtok: Math.round(Number(mOut.value || 0) * 1e6),
          context_window: Number(mCtx.value) || 0 }), () => `The model ${mName.value.trim()} is added.`) },
      h("h2", {}, "Add a model"), field("Provider", mProvider), field("Model", mName), field("Tier (1 cheapest – 5 strongest)", mTier),
      field("Input price per million tokens", mIn), field("Output price per million tokens", mOut), field("Context window", mCtx),
      h("button", { type: "submit" }, "Add the model")) : null];
  }
  show(h("h1", {}, "Models and providers"),
    h("p", { class: "muted" }, admin ? "Which models TheFold may choose from, and what they cost. Changes apply to the next model call."
      : "Which models TheFold may choose from. Admins change them."),
    error, providers.length === 0 ? h("p", { class: "empty" }, "No providers.") : providers.map(providerBlock), forms);
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
