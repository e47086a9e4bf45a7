// Small SVG charts: sparklines for the list, line charts for a sandbox,
// bars for a histogram. No library; values are numbers.
"use strict";
(function (C) {
  const h = C.h;

  function points(values, w, ht, max) {
    const top = Math.max(max || 0, ...values, 1e-9);
    if (values.length === 1) values = [values[0], values[0]]; // one sample: a flat line
    const step = w / (values.length - 1);
    return values.map((v, i) => (i * step).toFixed(1) + "," + (ht - (v / top) * (ht - 2) - 1).toFixed(1)).join(" ");
  }

  C.sparkline = function (values, label, color) {
    const w = 80, ht = 22;
    const svg = h("svg", { class: "spark", width: w, height: ht, viewBox: `0 0 ${w} ${ht}`, role: "img", "aria-label": label });
    if (values.length) svg.append(h("polyline", { points: points(values, w, ht), fill: "none", stroke: color || "#2457c5", "stroke-width": "1.5" }));
    return svg;
  };

  // line is a chart of values over time with a caption: title, the last
  // value formatted by fmt, and the maximum (max, when known) as scale.
  C.line = function (title, values, fmt, max, color) {
    const w = 400, ht = 120;
    const svg = h("svg", { class: "chart", viewBox: `0 0 ${w} ${ht}`, preserveAspectRatio: "none", role: "img",
      "aria-label": title + ": " + (values.length ? fmt(values[values.length - 1]) : "no samples yet") });
    if (values.length) svg.append(h("polyline", { points: points(values, w, ht, max), fill: "none", stroke: color || "#2457c5", "stroke-width": "2" }));
    const last = values.length ? fmt(values[values.length - 1]) : "no samples yet";
    return h("figure", { class: "chartbox" }, h("figcaption", {}, h("strong", {}, title), " ", h("span", { class: "muted" }, last + (max ? " of " + fmt(max) : ""))), svg);
  };

  // bars draws [{label, value}] as a bar chart.
  C.bars = function (title, items, fmt) {
    const w = 400, ht = 140, pad = 18;
    const top = Math.max(1e-9, ...items.map((i) => i.value));
    const bw = items.length ? (w / items.length) : w;
    const svg = h("svg", { class: "chart", viewBox: `0 0 ${w} ${ht}`, preserveAspectRatio: "none", role: "img", "aria-label": title });
    items.forEach((it, i) => {
      const bh = (it.value / top) * (ht - pad - 4);
      svg.append(h("rect", { x: (i * bw + 2).toFixed(1), y: (ht - pad - bh).toFixed(1), width: Math.max(1, bw - 4).toFixed(1), height: bh.toFixed(1), fill: "#2457c5" },
        h("title", {}, it.label + ": " + fmt(it.value))));
      svg.append(h("text", { x: (i * bw + bw / 2).toFixed(1), y: ht - 4, "font-size": "9", "text-anchor": "middle", fill: "#5b6475" }, it.label));
    });
    return h("figure", { class: "chartbox" }, h("figcaption", {}, h("strong", {}, title)), svg);
  };
})(window.Corral);
