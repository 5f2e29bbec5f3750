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
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
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
  n.replaceChildren();
  if (text) n.append(h("p", { class: "notice " + (kind || "info") }, text));
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
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
];

function navigate(path, state, replace) {
  if (replace) history.replaceState(state || null, "", path);
  else history.pushState(state || null, "", path);
  render();
}

async function render() {
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
  const create = h("form", { class: "card", id: "new-task", onsubmit: async (e) => {
    e.preventDefault();
    createError.textContent = "";
    try {
      const r = await api("POST", "/v1/tasks", { title: title.value, repo: newRepo.value.trim(), description: description.value });
      navigate("/tasks/" + encodeURIComponent(r.task.id), { notice: "Task created." });
    } catch (err) {
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
  show(h("h1", {}, "Tasks"), filters, table, create);
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
    ["Job", t.job_id || ""],
    ["Created", t.create_time ? new Date(t.create_time).toLocaleString() : ""],
  ].filter(([, v]) => v);
  const pr = t.pull_request && t.pull_request.url
    ? h("p", {}, "Pull request: ", h("a", { href: t.pull_request.url, rel: "noopener noreferrer" }, t.pull_request.url))
    : null;
  show(
    h("p", {}, h("a", { href: "/tasks", "data-nav": true }, "← Tasks")),
    h("h1", { class: "task-title" }, t.title),
    h("dl", { class: "facts" }, rows.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    pr,
    h("h2", {}, "Description"),
    t.description ? h("pre", { class: "description" }, t.description) : h("p", { class: "empty" }, "No description."),
  );
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
