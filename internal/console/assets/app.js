// The console's core: a tiny DOM helper, the API client (the public /v1
// API only, with the session cookie and the CSRF header), the router,
// sign-in, and the sandboxes list with its create form.
"use strict";

const C = window.Corral = {};

// h builds an element: h("a", {href: "#"}, "text", child...). Text is
// always text (never HTML).
C.h = function (tag, attrs, ...kids) {
  const svg = ["svg", "polyline", "rect", "line", "text", "path", "g", "title"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) el.append(kid instanceof Node ? kid : String(kid));
  return el;
};
const h = C.h;

function cookie(name) {
  for (const part of document.cookie.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return "";
}

// APIError carries the API's plain-language message.
class APIError extends Error {
  constructor(status, code, message) { super(message); this.status = status; this.code = code; }
}
C.APIError = APIError;

// api calls the public API. body: an object (JSON), a Blob/File (raw), or
// undefined. raw: return the Response instead of parsed JSON.
C.api = async function (method, path, body, raw) {
  const headers = {};
  // Over TLS the daemon names it __Host-corral_csrf (no other host can set
  // that one); over plain HTTP, corral_csrf.
  if (method !== "GET" && method !== "HEAD") headers["X-Corral-CSRF"] = cookie("__Host-corral_csrf") || cookie("corral_csrf");
  let payload = body;
  if (body !== undefined && !(body instanceof Blob)) {
    headers["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, credentials: "same-origin" });
  } catch (e) {
    throw new APIError(0, "unavailable", "The daemon did not answer (" + e.message + "). Is it running?");
  }
  if (!res.ok) {
    let msg = res.status + " " + res.statusText, code = "";
    try { const j = await res.json(); msg = j.error.message; code = j.error.code; } catch (_) { /* not JSON */ }
    if (res.status === 401 && !path.startsWith("/console/")) { C.signedOut(msg); }
    throw new APIError(res.status, code, msg);
  }
  if (raw) return res;
  if (res.status === 204) return null;
  const type = res.headers.get("Content-Type") || "";
  return type.includes("json") ? res.json() : res.text();
};

C.flash = function (msg, info) {
  const f = document.getElementById("flash");
  f.textContent = msg;
  f.className = info ? "info" : "";
  f.hidden = !msg;
};

// busy disables button while fn runs, says what is happening, and shows
// any error in plain words.
C.busy = async function (button, label, fn) {
  const old = button.textContent;
  button.disabled = true;
  button.textContent = label + "…";
  C.flash("");
  try { return await fn(); } catch (e) { C.flash(e.message); } finally { button.disabled = false; button.textContent = old; }
};

C.ago = function (t) {
  if (!t) return "";
  const s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return Math.floor(s) + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h";
  return Math.floor(s / 86400) + "d";
};
C.bytes = function (n) {
  if (n === undefined || n === null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
};
// swap replaces box's children with nodes only when they differ, so a
// poll that changed nothing keeps the page's focus and selection.
C.swap = function (box, ...nodes) {
  const next = nodes.map((n) => n.outerHTML || n.textContent).join("");
  if (box.dataset.drawn !== next) { box.replaceChildren(...nodes); box.dataset.drawn = next; }
};
C.state = (s) => h("span", { class: "state " + s }, s);
C.tags = (t) => Object.entries(t || {}).map(([k, v]) => h("span", { class: "tag" }, v ? k + "=" + v : k));

// Pages register here: C.pages[name] = async (main, arg) => cleanup fn.
C.pages = {};
let cleanup = null;

async function route() {
  if (cleanup) { try { cleanup(); } catch (_) { /* page gone */ } cleanup = null; }
  const main = document.getElementById("main");
  main.replaceChildren();
  C.flash("");
  const [, name = "", arg = ""] = (location.hash.replace(/^#\/?/, "").match(/^([^/]*)\/?(.*)$/) || []);
  const page = C.pages[name || "sandboxes"] || C.pages.notfound;
  const loading = h("p", { class: "progress", role: "status" }, "Loading…");
  main.append(loading);
  try {
    cleanup = await page(main, decodeURIComponent(arg));
  } catch (e) {
    if (!(e instanceof APIError && e.status === 401)) C.flash(e.message);
  } finally {
    loading.remove();
  }
}
C.go = (hash) => { if (location.hash === hash) route(); else location.hash = hash; };

// signedOut shows the sign-in form (the API said 401).
C.signedOut = function (why) {
  document.getElementById("nav").hidden = true;
  if (cleanup) { try { cleanup(); } catch (_) { /* ignore */ } cleanup = null; }
  const main = document.getElementById("main");
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "current-password", required: true });
  const msg = h("p", { id: "login-error", class: "muted", role: "alert" }, why && why !== "not signed in" ? why : "");
  const btn = h("button", { class: "primary", type: "submit" }, "Sign in");
  const form = h("form", { class: "card login", onsubmit: async (ev) => {
    ev.preventDefault();
    await C.busy(btn, "Signing in", async () => {
      try {
        await C.api("POST", "/console/login", { token: input.value });
      } catch (e) { msg.textContent = e.message; msg.className = "error"; return; }
      document.getElementById("nav").hidden = false;
      route();
    });
  } },
  h("h1", {}, "Sign in to Corral"),
  h("p", { class: "muted" }, "Paste the daemon's API token (corral serve prints where it keeps it). It stays on the server: the browser only gets a session cookie."),
  h("label", { for: "token" }, "API token", input), msg, h("p", {}, btn));
  main.replaceChildren(form);
  input.focus();
};

C.pages.notfound = async (main) => { main.append(h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the sandboxes"))); };

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", async () => {
  document.getElementById("logout").addEventListener("click", async () => {
    try { await C.api("POST", "/console/logout"); } catch (_) { /* signed out anyway */ }
    C.signedOut("Signed out.");
  });
  try {
    await C.api("GET", "/v1/version");
    document.getElementById("nav").hidden = false;
    route();
  } catch (e) {
    if (!(e instanceof APIError && e.status === 401)) C.flash(e.message);
  }
});
