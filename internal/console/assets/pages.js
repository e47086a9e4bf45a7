// The list pages: sandboxes (live, filtered, with sparklines and the
// create form), images, memory snapshots, warm pools and the host.
"use strict";
(function (C) {
  const h = C.h;
  const LIVE = "creating,running,paused,terminating";

  // every runs fn now and every ms until the returned stop is called;
  // a failed round shows its error and the next one tries again.
  C.every = function (ms, fn) {
    let stopped = false, timer = null;
    const tick = async () => {
      try { await fn(); } catch (e) { if (!stopped && e.status !== 401) C.flash(e.message); }
      if (!stopped) timer = setTimeout(tick, ms);
    };
    tick();
    return () => { stopped = true; clearTimeout(timer); };
  };

  function createForm(runtimes) {
    const f = (name, label, input) => h("label", { for: "new-" + name }, label, input);
    const image = h("input", { id: "new-image", name: "image", placeholder: "default image" });
    const runtime = h("select", { id: "new-runtime", name: "runtime" }, runtimes.map((r) => h("option", { value: r }, r)));
    const cpu = h("input", { id: "new-cpu", name: "cpu", type: "number", step: "0.25", min: "0.25", placeholder: "default" });
    const mem = h("input", { id: "new-memory", name: "memory_mb", type: "number", step: "64", min: "64", placeholder: "default" });
    const timeout = h("input", { id: "new-timeout", name: "timeout", type: "number", min: "1", placeholder: "seconds" });
    const net = h("select", { id: "new-network", name: "network" },
      h("option", { value: "default" }, "internet only (private ranges denied)"),
      h("option", { value: "block" }, "no network"),
      h("option", { value: "cidr" }, "only these CIDRs"));
    const cidrs = h("input", { id: "new-cidrs", name: "cidrs", placeholder: "e.g. 198.51.100.0/24, comma-separated" });
    const name = h("input", { id: "new-name", name: "name", placeholder: "optional" });
    const tags = h("input", { id: "new-tags", name: "tags", placeholder: "k=v, k2=v2" });
    const command = h("input", { id: "new-command", name: "command", placeholder: "optional: runs as the entrypoint (sh -c)" });
    const status = h("span", { class: "progress", role: "status", hidden: true });
    const btn = h("button", { class: "primary", type: "submit", id: "new-create" }, "Create sandbox");
    const form = h("form", { class: "inline", id: "create-form", onsubmit: async (ev) => {
      ev.preventDefault();
      const req = { runtime: runtime.value };
      if (image.value.trim()) req.image = image.value.trim();
      if (name.value.trim()) req.name = name.value.trim();
      if (command.value.trim()) req.entrypoint = ["/bin/sh", "-c", command.value.trim()];
      for (const kv of tags.value.split(",").map((s) => s.trim()).filter(Boolean)) {
        const [k, ...v] = kv.split("=");
        (req.tags = req.tags || {})[k.trim()] = v.join("=").trim();
      }
      if (cpu.value) req.cpu = Number(cpu.value);
      if (mem.value) req.memory_mb = Number(mem.value);
      if (timeout.value) req.timeout = Number(timeout.value);
      if (net.value === "block") req.block_network = true;
      if (net.value === "cidr") req.cidr_allowlist = cidrs.value.split(",").map((s) => s.trim()).filter(Boolean);
      status.hidden = false;
      status.textContent = "Creating a " + req.runtime + " sandbox… (the list stays usable meanwhile)";
      await C.busy(btn, "Creating", async () => {
        try {
          const sb = await C.api("POST", "/v1/sandboxes", req);
          C.flash("Created " + sb.id + ".", true);
        } finally { status.hidden = true; }
      });
    } }, f("image", "Image", image), f("runtime", "Runtime", runtime), f("cpu", "CPU", cpu),
    f("memory", "Memory (MB)", mem), f("timeout", "Timeout (s)", timeout), f("network", "Network", net), f("cidrs", "Allowed CIDRs", cidrs),
    f("name", "Name", name), f("tags", "Tags", tags), f("command", "Command", command), btn, status);
    // Open on a laptop, folded on a phone (the list comes first there).
    return h("details", { class: "card", id: "create", open: window.innerWidth > 700 }, h("summary", {}, h("h2", {}, "New sandbox")), form);
  }

  C.pages.sandboxes = async (main) => {
    const v = await C.api("GET", "/v1/version");
    const stateSel = h("select", { id: "filter-state", "aria-label": "state filter" },
      h("option", { value: LIVE }, "live"), ...["running", "paused", "creating", "terminated", "failed"].map((s) => h("option", { value: s }, s)),
      h("option", { value: "" }, "all"));
    const rtSel = h("select", { id: "filter-runtime", "aria-label": "runtime filter" }, h("option", { value: "" }, "any runtime"),
      v.runtimes.map((r) => h("option", { value: r }, r)));
    const tagIn = h("input", { id: "filter-tag", placeholder: "tag key=value", "aria-label": "tag filter" });
    const body = h("tbody", { id: "sandbox-rows" });
    const count = h("span", { class: "muted small", role: "status" });
    main.append(h("h1", {}, "Sandboxes"), createForm(v.runtimes),
      h("div", { class: "card" },
        h("div", { class: "row" }, h("label", {}, "State", stateSel), h("label", {}, "Runtime", rtSel), h("label", {}, "Tag", tagIn), count),
        h("table", { id: "sandboxes" }, h("thead", {}, h("tr", {}, ["Sandbox", "State", "Runtime", "Image", "Age", "Tags", "CPU", "Memory"].map((c, i) =>
          h("th", { class: i === 3 || i === 5 ? "hide-sm" : null }, c)))), body)));
    const spark = {};
    const refresh = async () => {
      const q = new URLSearchParams();
      if (stateSel.value) q.set("state", stateSel.value);
      if (tagIn.value.trim()) q.append("tag", tagIn.value.trim());
      const list = await C.api("GET", "/v1/sandboxes?" + q);
      const rows = list.sandboxes.filter((s) => !rtSel.value || s.runtime === rtSel.value);
      await Promise.all(rows.slice(0, 50).filter((s) => s.state === "running").map(async (s) => {
        try { spark[s.id] = (await C.api("GET", "/v1/sandboxes/" + s.id + "/metrics")).samples; } catch (_) { /* gone meanwhile */ }
      }));
      // Rows that did not change stay (only their age and sparklines are
      // redrawn), so keyboard focus on a row's link survives the refresh.
      const old = new Map([...body.children].map((tr) => [tr.dataset.id, tr]));
      const trs = rows.map((s) => {
        const m = spark[s.id] || [];
        const cpu = C.sparkline(m.map((x) => x.cpu_percent), "CPU percent"), mem = C.sparkline(m.map((x) => x.memory_used), "memory used", "#067647");
        const sig = [s.name, s.state, s.runtime, s.image, JSON.stringify(s.tags || {})].join("|");
        const tr = old.get(s.id);
        if (tr && tr.dataset.sig === sig) {
          tr.cells[4].textContent = C.ago(s.created_at);
          tr.cells[6].replaceChildren(cpu);
          tr.cells[7].replaceChildren(mem);
          return tr;
        }
        return h("tr", { "data-id": s.id, "data-sig": sig },
          h("td", {}, h("a", { href: "#/sandbox/" + s.id }, s.name || s.id)), h("td", {}, C.state(s.state)), h("td", {}, s.runtime),
          h("td", { class: "hide-sm" }, s.image), h("td", { class: "num" }, C.ago(s.created_at)), h("td", { class: "hide-sm" }, C.tags(s.tags)),
          h("td", {}, cpu), h("td", {}, mem));
      });
      if (trs.length !== body.children.length || trs.some((tr, i) => body.children[i] !== tr)) body.replaceChildren(...trs);
      count.textContent = rows.length + " shown";
    };
    for (const el of [stateSel, rtSel]) el.addEventListener("change", refresh);
    tagIn.addEventListener("change", refresh);
    return C.every(2000, refresh);
  };

  function table(id, heads, rows) {
    return h("table", { id }, h("thead", {}, h("tr", {}, heads.map((c) => h("th", {}, c)))), h("tbody", {}, rows));
  }

  C.pages.images = async (main) => {
    const box = h("div", { class: "card" });
    const refresh = async () => {
      const list = await C.api("GET", "/v1/images");
      box.replaceChildren(table("images", ["Tags", "Digest", "Layers", "Size", "Created", "In use"],
        list.images.map((i) => h("tr", {}, h("td", {}, (i.tags || []).map((t) => h("span", { class: "tag" }, t))), h("td", { class: "small" }, i.digest.slice(0, 19)),
          h("td", { class: "num" }, i.layers.length), h("td", { class: "num" }, C.bytes(i.size)), h("td", {}, C.ago(i.created) + " ago"), h("td", {}, i.in_use ? "yes" : "no")))));
    };
    main.append(h("h1", {}, "Images"), buildForm(refresh), box);
    await refresh();
  };

  // buildForm builds an image from a base, apt packages and shell
  // commands, streaming each step's progress and output as it comes.
  function buildForm(done) {
    const base = h("input", { id: "build-base", value: "debian:bookworm", required: true, title: "debian:SUITE (the daemon's base root filesystem) or an image" });
    const tag = h("input", { id: "build-tag", placeholder: "name:tag" });
    const apt = h("input", { id: "build-apt", placeholder: "packages, space-separated" });
    const run = h("textarea", { id: "build-run", rows: "3", cols: "40", placeholder: "shell commands, one per line" });
    const steps = h("ol", { id: "build-steps", class: "small" }), out = h("pre", { class: "logs", id: "build-output", hidden: true });
    const btn = h("button", { class: "primary", type: "submit", id: "build-start" }, "Build");
    const form = h("form", { class: "inline", onsubmit: (ev) => {
      ev.preventDefault();
      const spec = { base: base.value.trim(), steps: [] };
      if (apt.value.trim()) spec.steps.push({ apt_install: apt.value.trim().split(/\s+/) });
      const cmds = run.value.split("\n").map((l) => l.trim()).filter(Boolean);
      if (cmds.length) spec.steps.push({ run: cmds });
      steps.replaceChildren();
      out.textContent = ""; out.hidden = true;
      C.busy(btn, "Building", async () => {
        const res = await C.api("POST", "/v1/images/build", { spec, tag: tag.value.trim() || undefined }, true);
        const items = {};
        await ndjson(res, (ev) => {
          if (ev.type === "step") {
            const text = `${ev.name || "step " + ev.step}: ${ev.status}` + (ev.seconds ? ` (${ev.seconds.toFixed(1)} s)` : "");
            if (!items[ev.step]) steps.append(items[ev.step] = h("li", { "data-step": ev.step }));
            items[ev.step].textContent = text;
            items[ev.step].className = ev.status;
          } else if (ev.type === "output" && ev.data) {
            out.hidden = false;
            out.textContent += atob(ev.data);
            out.scrollTop = out.scrollHeight;
          } else if (ev.type === "done") {
            steps.append(h("li", { class: "done", id: "build-done" }, "Built " + (ev.image ? (ev.image.tags || [ev.image.digest]).join(", ") : "") + "."));
          } else if (ev.type === "error") {
            throw new C.APIError(0, ev.error && ev.error.code, "The build failed: " + (ev.error ? ev.error.message : "unknown error"));
          }
        });
        await done();
      });
    } }, h("label", { for: "build-base" }, "Base image", base), h("label", { for: "build-apt" }, "apt install", apt),
    h("label", { for: "build-run" }, "Run", run), h("label", { for: "build-tag" }, "Tag", tag), btn);
    return h("details", { class: "card", id: "build" }, h("summary", {}, h("h2", {}, "Build an image")), form, steps, out);
  }

  // ndjson calls fn with each JSON line of res's body as it arrives.
  async function ndjson(res, fn) {
    const reader = res.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (value) buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) fn(JSON.parse(line));
      }
      if (done) return;
    }
  }

  C.pages.snapshots = async (main) => {
    const list = await C.api("GET", "/v1/snapshots");
    main.append(h("h1", {}, "Memory snapshots"), h("div", { class: "card" }, table("snapshots", ["Snapshot", "From", "Runtime", "Image", "Size", "Created", ""],
      list.snapshots.map((s) => {
        const del = h("button", { class: "danger", type: "button", onclick: () => C.busy(del, "Deleting", async () => {
          await C.api("DELETE", "/v1/snapshots/" + encodeURIComponent(s.id)); C.go("#/snapshots");
        }) }, "Delete");
        const start = h("button", { type: "button", onclick: () => C.busy(start, "Starting", async () => {
          const sb = await C.api("POST", "/v1/sandboxes", { from_snapshot: s.id }); C.go("#/sandbox/" + sb.id);
        }) }, "Start copy");
        return h("tr", {}, h("td", {}, s.name || s.id), h("td", {}, h("a", { href: "#/sandbox/" + s.sandbox_id }, s.sandbox_id)), h("td", {}, s.runtime),
          h("td", {}, s.image), h("td", { class: "num" }, C.bytes(s.size_bytes)), h("td", {}, C.ago(s.created_at) + " ago"), h("td", {}, start, " ", del));
      }))));
  };

  C.pages.pools = async (main) => {
    const box = h("div", { class: "card" });
    main.append(h("h1", {}, "Warm pools"), box);
    return C.every(3000, async () => {
      const v = await C.api("GET", "/v1/version");
      const pools = v.warm_pools || [];
      C.swap(box, pools.length ? table("pools", ["Runtime", "Image", "CPU", "Memory", "Size", "Ready", "Hits", "Misses", "Hit rate"],
        pools.map((p) => h("tr", {}, h("td", {}, p.runtime), h("td", {}, p.image || "default"), h("td", { class: "num" }, p.cpu), h("td", { class: "num" }, p.memory_mb + " MB"),
          h("td", { class: "num" }, p.size), h("td", { class: "num" }, p.ready), h("td", { class: "num" }, p.hits), h("td", { class: "num" }, p.misses),
          h("td", { class: "num" }, rate(p.hits, p.misses))))) : h("p", { class: "muted" }, "No warm pools (corral serve --warm-pool N keeps sandboxes ready)."));
    });
  };

  function rate(hits, misses) { return hits + misses ? Math.round((100 * hits) / (hits + misses)) + "%" : "–"; }

  // parseMetrics reads Prometheus text into [{name, labels, value}].
  function parseMetrics(text) {
    const out = [];
    for (const line of text.split("\n")) {
      const m = line.match(/^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/);
      if (!m) continue;
      const labels = {};
      for (const kv of (m[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
      out.push({ name: m[1], labels, value: Number(m[4]) });
    }
    return out;
  }

  C.pages.host = async (main) => {
    const over = [], cap = h("div", { class: "card" }), charts = h("div", { class: "grid" }), denied = h("div", { class: "card" });
    main.append(h("h1", {}, "Host"), cap, charts, denied);
    return C.every(5000, async () => {
      const [v, text, live] = await Promise.all([C.api("GET", "/v1/version"), C.api("GET", "/metrics").catch(() => ""),
        C.api("GET", "/v1/sandboxes?state=" + LIVE)]);
      const c = v.capacity || {};
      C.swap(cap, h("h2", {}, "Capacity"), h("dl", { class: "record" },
        h("dt", {}, "Sandboxes"), h("dd", {}, (c.sandboxes || 0) + (c.max_sandboxes ? " of " + c.max_sandboxes : "")),
        h("dt", {}, "Memory reserved"), h("dd", {}, (c.reserved_memory_mb || 0) + " of " + (c.admittable_memory_mb || 0) + " MB admittable"),
        h("dt", {}, "CPU reserved"), h("dd", {}, (c.reserved_cpu || 0) + " of " + (c.admittable_cpu || 0) + " admittable"),
        h("dt", {}, "Runtimes"), h("dd", {}, v.runtimes.join(", ")),
        h("dt", {}, "Warm pool hit rate"), h("dd", {}, v.warm_pool ? rate(v.warm_pool.hits, v.warm_pool.misses) + " (" + v.warm_pool.hits + " hits, " + v.warm_pool.misses + " misses)" : "no pool")));
      over.push(live.sandboxes.length);
      if (over.length > 120) over.shift();
      const ms = parseMetrics(text);
      const buckets = ms.filter((m) => m.name === "corral_sandbox_time_to_interactive_seconds_bucket");
      const les = [...new Set(buckets.map((b) => b.labels.le))].sort((a, b) => Number(a) - Number(b));
      let prev = 0;
      let hist = les.map((le) => {
        const cum = buckets.filter((b) => b.labels.le === le).reduce((a, b) => a + b.value, 0);
        const item = { label: le === "+Inf" ? "more" : "≤" + Number(Number(le).toPrecision(2)) + "s", value: cum - prev };
        prev = cum;
        return item;
      });
      // Only the range that has creates in it (one empty bucket each side).
      const first = hist.findIndex((b) => b.value > 0), last = hist.length - 1 - [...hist].reverse().findIndex((b) => b.value > 0);
      if (first >= 0) hist = hist.slice(Math.max(0, first - 1), last + 2);
      charts.replaceChildren(h("div", { class: "card" }, C.line("Live sandboxes (sampled every 5 s while this page is open)", over, (x) => String(x))),
        h("div", { class: "card" }, hist.length ? C.bars("Time to interactive (creates since the daemon started)", hist, (x) => x + " creates") :
          h("p", { class: "muted" }, "Time to interactive: no /metrics on this listener (see --metrics-listen).")));
      const counts = await Promise.all(live.sandboxes.slice(0, 30).map(async (s) => {
        try {
          const evs = (await C.api("GET", "/v1/sandboxes/" + s.id + "/events")).events;
          return { id: s.id, n: evs.filter((e) => e.kind === "egress_denied").length };
        } catch (_) { return { id: s.id, n: 0 }; }
      }));
      const rows = counts.filter((x) => x.n > 0).sort((a, b) => b.n - a.n);
      C.swap(denied, h("h2", {}, "Denied egress by sandbox (live sandboxes' event logs)"), rows.length ?
        table("denied", ["Sandbox", "Denied connections"], rows.map((r) => h("tr", {}, h("td", {}, h("a", { href: "#/sandbox/" + r.id }, r.id)), h("td", { class: "num" }, r.n)))) :
        h("p", { class: "muted" }, "No denied connections among the live sandboxes."));
    });
  };
})(window.Corral);
