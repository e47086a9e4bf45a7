// The sandbox page: record, actions, charts, terminal (xterm.js over the
// PTY WebSocket), files, timeline, logs and network policy.
"use strict";
(function (C) {
  const h = C.h;
  const enc = encodeURIComponent;

  function record(sb) {
    const row = (k, v) => [h("dt", {}, k), h("dd", {}, v)];
    const n = sb.network || {};
    const policy = n.block_network ? "no network" : (n.cidr_allowlist || []).length || (n.domain_allowlist || []).length ?
      "only " + [...(n.cidr_allowlist || []), ...(n.domain_allowlist || [])].join(", ") : "internet only (private ranges denied)";
    return h("dl", { class: "record", id: "record" }, row("ID", sb.id), sb.name ? row("Name", sb.name) : null, row("State", C.state(sb.state)),
      row("Runtime", sb.runtime), row("Image", sb.image), row("CPU", sb.cpu + (sb.cpu_limit ? " (burst " + sb.cpu_limit + ")" : "")),
      row("Memory", sb.memory_mb + " MB"), row("Disk", sb.disk_mb + " MB"), row("Network", policy), row("Created", new Date(sb.created_at).toLocaleString()),
      sb.expires_at ? row("Expires", new Date(sb.expires_at).toLocaleString()) : null, row("Tags", C.tags(sb.tags)),
      sb.end_reason ? row("Ended", sb.end_reason + (sb.error ? ": " + sb.error : "")) : null);
  }

  function actions(id, sb, reload) {
    const act = (label, doing, cls, fn) => {
      const b = h("button", { type: "button", class: cls || null, id: "act-" + label.toLowerCase().replace(/\W+/g, "-") }, label);
      b.addEventListener("click", () => C.busy(b, doing, async () => { await fn(); await reload(); }));
      return b;
    };
    const live = !["terminated", "failed", "terminating"].includes(sb.state);
    return h("div", { class: "actions" },
      sb.state === "running" ? act("Pause", "Pausing", null, () => C.api("POST", `/v1/sandboxes/${id}/pause`)) : null,
      sb.state === "paused" ? act("Resume", "Resuming", null, () => C.api("POST", `/v1/sandboxes/${id}/resume`)) : null,
      sb.state === "running" ? act("Snapshot memory", "Snapshotting", null, async () => {
        const s = await C.api("POST", `/v1/sandboxes/${id}/snapshots/memory`, {}); C.flash("Saved snapshot " + s.id + ".", true);
      }) : null,
      sb.state === "running" ? act("Snapshot files", "Saving an image", null, async () => {
        const r = await C.api("POST", `/v1/sandboxes/${id}/snapshots/fs`, {});
        C.flash("Saved image " + r.digest + (r.left_out_count ? " (" + r.left_out_count + " device nodes, FIFOs or sockets left out)" : "") + ".", true);
      }) : null,
      sb.state === "running" ? act("Fork", "Forking", null, async () => {
        const r = await C.api("POST", `/v1/sandboxes/${id}/fork`, { count: 1 }); C.flash("Forked into " + r.sandboxes.map((s) => s.id).join(", ") + ".", true);
      }) : null,
      live ? act("Terminate", "Terminating", "danger", async () => {
        if (!confirm("Terminate " + id + "? Its files and processes go with it.")) return;
        await C.api("DELETE", `/v1/sandboxes/${id}`);
      }) : null);
  }

  function terminal(id, box, status) {
    const term = new window.Terminal({ cursorBlink: true, convertEol: false, fontSize: 14 });
    const fit = new window.FitAddon.FitAddon();
    term.loadAddon(fit);
    term.open(box);
    fit.fit();
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    const ws = new WebSocket(`${proto}//${location.host}/v1/sandboxes/${enc(id)}/pty?cols=${term.cols}&rows=${term.rows}`);
    ws.binaryType = "arraybuffer";
    const encoder = new TextEncoder();
    status.textContent = "Connecting…";
    ws.onopen = () => { status.textContent = "Connected."; term.focus(); };
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const m = JSON.parse(ev.data);
        if (m.type === "exit") status.textContent = "The shell ended (exit " + m.exit_code + ")" + (m.error ? ": " + m.error : ".");
        return;
      }
      term.write(new Uint8Array(ev.data));
    };
    ws.onclose = (ev) => { if (!status.textContent.startsWith("The shell")) status.textContent = "Disconnected" + (ev.reason ? ": " + ev.reason : "."); };
    ws.onerror = () => { status.textContent = "The terminal could not connect (is the sandbox running?)."; };
    term.onData((d) => { if (ws.readyState === 1) ws.send(encoder.encode(d)); });
    term.onResize(({ cols, rows }) => { if (ws.readyState === 1) ws.send(JSON.stringify({ type: "resize", cols, rows })); });
    const onWin = () => fit.fit();
    window.addEventListener("resize", onWin);
    return () => { window.removeEventListener("resize", onWin); ws.close(); term.dispose(); };
  }

  function files(id) {
    let dir = "/tmp";
    const pathIn = h("input", { id: "files-path", value: dir, "aria-label": "directory" });
    const body = h("tbody", { id: "file-rows" });
    const upload = h("input", { type: "file", id: "files-upload", "aria-label": "upload a file" });
    const status = h("span", { class: "progress", role: "status", hidden: true });
    const list = async () => {
      dir = pathIn.value.replace(/\/+$/, "") || "/";
      const r = await C.api("GET", `/v1/sandboxes/${id}/fs/list?path=${enc(dir)}`);
      body.replaceChildren(...r.entries.sort((a, b) => (a.type === "dir") === (b.type === "dir") ? a.name.localeCompare(b.name) : a.type === "dir" ? -1 : 1).map((e) => {
        const del = h("button", { type: "button", class: "danger", "aria-label": "delete " + e.name, onclick: () => C.busy(del, "Deleting", async () => {
          if (!confirm("Delete " + e.path + "?")) return;
          await C.api("POST", `/v1/sandboxes/${id}/fs/remove`, { path: e.path, recursive: e.type === "dir" }); await list();
        }) }, "Delete");
        const name = e.type === "dir" ? h("a", { href: "#", onclick: (ev) => { ev.preventDefault(); pathIn.value = e.path; list().catch((x) => C.flash(x.message)); } }, e.name + "/") :
          h("a", { href: `/v1/sandboxes/${enc(id)}/files?path=${enc(e.path)}`, download: e.name }, e.name);
        return h("tr", { "data-name": e.name }, h("td", {}, name), h("td", { class: "num" }, e.type === "dir" ? "" : C.bytes(e.size)),
          h("td", { class: "small hide-sm" }, e.permissions), h("td", {}, del));
      }));
    };
    upload.addEventListener("change", async () => {
      const f = upload.files[0];
      if (!f) return;
      status.hidden = false; status.textContent = "Uploading " + f.name + " (" + C.bytes(f.size) + ")…";
      try {
        await C.api("PUT", `/v1/sandboxes/${id}/files?path=${enc(dir + "/" + f.name)}`, f);
        await list();
      } catch (e) { C.flash(e.message); } finally { status.hidden = true; upload.value = ""; }
    });
    const go = h("button", { type: "button", onclick: () => list().catch((e) => C.flash(e.message)) }, "List");
    pathIn.addEventListener("keydown", (ev) => { if (ev.key === "Enter") go.click(); });
    return { el: h("section", { class: "card", id: "files" }, h("h2", {}, "Files"), h("div", { class: "row" }, h("label", {}, "Directory", pathIn), go,
      h("label", {}, "Upload", upload), status), h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Size"), h("th", { class: "hide-sm" }, "Mode"), h("th", {}, ""))), body)), list };
  }

  function network(id, sb, reload) {
    const n = sb.network || {};
    const block = h("input", { type: "checkbox", id: "net-block", checked: !!n.block_network });
    const cidrs = h("input", { id: "net-cidrs", value: (n.cidr_allowlist || []).join(", "), placeholder: "CIDRs, comma-separated" });
    const domains = h("input", { id: "net-domains", value: (n.domain_allowlist || []).join(", "), placeholder: "domains, comma-separated" });
    const btn = h("button", { type: "submit" }, "Apply policy");
    const split = (s) => s.split(",").map((x) => x.trim()).filter(Boolean);
    return h("form", { class: "card inline", id: "network", onsubmit: (ev) => {
      ev.preventDefault();
      C.busy(btn, "Applying", async () => {
        await C.api("PUT", `/v1/sandboxes/${id}/network`, { block_network: block.checked, cidr_allowlist: split(cidrs.value), domain_allowlist: split(domains.value) });
        C.flash("Network policy applied.", true); await reload();
      });
    } }, h("h2", {}, "Network policy"), h("label", { for: "net-block" }, "Block everything", block), h("label", { for: "net-cidrs" }, "Allowed CIDRs", cidrs),
    h("label", { for: "net-domains" }, "Allowed domains", domains), btn);
  }

  // follow streams the logs into pre until stopped.
  function follow(id, pre) {
    const ctl = new AbortController();
    (async () => {
      try {
        const res = await fetch(`/v1/sandboxes/${enc(id)}/logs?follow=true`, { signal: ctl.signal, credentials: "same-origin" });
        if (!res.ok) return;
        const reader = res.body.getReader(), dec = new TextDecoder();
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          pre.textContent += dec.decode(value, { stream: true });
          pre.scrollTop = pre.scrollHeight;
        }
      } catch (_) { /* stopped or gone */ }
    })();
    return () => ctl.abort();
  }

  C.pages.sandbox = async (main, id) => {
    let sb = await C.api("GET", "/v1/sandboxes/" + enc(id));
    id = sb.id;
    const head = h("div", {}), rec = h("section", { class: "card" }), charts = h("section", { class: "card grid", id: "charts" });
    const tl = h("ol", { class: "timeline", id: "timeline", "aria-live": "polite" });
    const pre = h("pre", { class: "logs", id: "logs" });
    const termBox = h("div", { id: "terminal" }), termStatus = h("span", { class: "muted small", id: "terminal-status", role: "status" });
    const fl = files(id);
    let stopTerm = null;
    const openBtn = h("button", { type: "button", id: "open-terminal", onclick: () => {
      if (stopTerm) stopTerm();
      termBox.replaceChildren();
      stopTerm = terminal(id, termBox, termStatus);
    } }, "Open terminal");
    const net = h("div", {});
    // The heading and its buttons are made again only when the state or
    // name changed: a reload (the timeline's events ask for them) that
    // swapped the buttons between a press and its release lost the click.
    let shown = "";
    const reload = async () => {
      sb = await C.api("GET", "/v1/sandboxes/" + enc(id));
      const now = sb.state + "\n" + (sb.name || sb.id);
      if (now !== shown) {
        shown = now;
        head.replaceChildren(h("h1", {}, "Sandbox ", sb.name || sb.id, " ", C.state(sb.state)), actions(id, sb, reload));
      }
      rec.replaceChildren(h("h2", {}, "Record"), record(sb));
      net.replaceChildren(network(id, sb, reload));
    };
    await reload();
    main.append(head, h("div", { class: "grid" }, rec, h("section", { class: "card" }, h("h2", {}, "Timeline"), tl)), charts,
      h("section", { class: "card" }, h("h2", {}, "Terminal"), h("div", { class: "row" }, openBtn, termStatus), termBox), fl.el, net,
      h("section", { class: "card" }, h("h2", {}, "Logs (following)"), pre));
    if (sb.state === "running") fl.list().catch((e) => C.flash(e.message));
    let after = 0;
    const stopPoll = C.every(1500, async () => {
      const [evs, m] = await Promise.all([C.api("GET", `/v1/sandboxes/${enc(id)}/events?after=${after}`),
        C.api("GET", `/v1/sandboxes/${enc(id)}/metrics`).catch(() => ({ samples: [] }))]);
      for (const e of evs.events) {
        after = Math.max(after, e.seq);
        tl.append(h("li", { class: e.kind === "egress_denied" ? "denied" : e.kind, "data-kind": e.kind },
          h("time", { datetime: e.time }, new Date(e.time).toLocaleTimeString()), h("strong", {}, e.kind), " ", e.message));
        if (["paused", "resumed", "terminated", "failed", "running"].some((k) => e.kind.includes(k))) reload().catch(() => {});
      }
      if (evs.events.length) tl.scrollTop = tl.scrollHeight;
      const s = m.samples || [];
      const last = s[s.length - 1] || {};
      charts.replaceChildren(C.line("CPU", s.map((x) => x.cpu_percent), (x) => x.toFixed(0) + "%", (last.cpu_count || 1) * 100),
        C.line("Memory", s.map((x) => x.memory_used), C.bytes, last.memory_total, "#067647"),
        C.line("Disk", s.map((x) => x.disk_used), C.bytes, last.disk_total, "#b54708"));
    });
    const stopLogs = follow(id, pre);
    return () => { stopPoll(); stopLogs(); if (stopTerm) stopTerm(); };
  };
})(window.Corral);
