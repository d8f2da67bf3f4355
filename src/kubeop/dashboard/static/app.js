// The kubeop dashboard: one page, three tabs, each fed by a server-sent event stream.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
let source = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

const ms = (s) => (s === null || s === undefined ? "–" : s < 1 ? (s * 1000).toFixed(1) + " ms" : s.toFixed(2) + " s");
const rate = (r) => (r === null || r === undefined ? "–" : r.toFixed(r < 10 ? 2 : 0));
const pct = (r) => (r === null || r === undefined ? "–" : (r * 100).toFixed(1) + " %");
const when = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "–");
const until = (t) => {
  if (t === null || t === undefined) return "not retried";
  const s = t - Date.now() / 1000;
  return s <= 0 ? "now" : "in " + (s < 1 ? (s * 1000).toFixed(0) + " ms" : s.toFixed(1) + " s");
};

function spark(values) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", "0 0 140 26");
  const nums = values.map((v) => (v === null ? 0 : v));
  const max = Math.max(...nums, 1e-9);
  const step = 140 / Math.max(nums.length - 1, 1);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", nums.map((v, i) => `${(i * step).toFixed(1)},${(24 - (v / max) * 22).toFixed(1)}`).join(" "));
  svg.append(line);
  return svg;
}

function dl(target, pairs) {
  target.replaceChildren(...Object.entries(pairs).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))]));
}

function objectLink(kind, namespace, name) {
  const q = new URLSearchParams({ kind, namespace, name });
  return el("a", { class: "obj", href: "#object?" + q }, (namespace ? namespace + "/" : "") + name);
}

function renderOverview(d) {
  $("#title").textContent = d.name + " · kubeop";
  $("#failing-count").textContent = d.failing ? d.failing : "";
  $("#controllers tbody").replaceChildren(
    ...d.controllers.map((c) =>
      el("tr", { "data-controller": c.name },
        el("td", {}, c.name), el("td", {}, c.kind),
        el("td", { class: "num" }, c.depth), el("td", { class: "num" }, rate(c.adds_per_s)),
        el("td", { class: "num" }, rate(c.reconciles_per_s)),
        el("td", { class: "num " + (c.error_rate ? "bad" : "") }, pct(c.error_rate)),
        el("td", { class: "num" }, ms(c.p50)), el("td", { class: "num" }, ms(c.p99)),
        el("td", { class: "num" }, `${c.busy} / ${c.workers}`),
        el("td", { class: "num " + (c.failing ? "bad" : "") }, c.failing),
        el("td", {}, spark(c.spark.reconciles || [])), el("td", {}, spark(c.spark.p99 || []))))
  );
  dl($("#replica"), d.replica);
  dl($("#api"), d.api);
  $("#webhooks tbody").replaceChildren(
    ...(d.webhooks.length
      ? d.webhooks.map((w) =>
        el("tr", { "data-webhook": w.path },
          el("td", {}, w.path), el("td", {}, w.type || w.kind),
          el("td", { class: "num" }, w.requests ?? 0), el("td", { class: "num" }, rate(w.requests_per_s)),
          el("td", { class: "num" }, w.in_flight ?? 0),
          el("td", { class: "num" }, ms(w.p50)), el("td", { class: "num" }, ms(w.p99)),
          el("td", { class: "num" }, w.denials ?? 0),
          el("td", { class: "num " + (w.errors ? "bad" : "") }, w.errors ?? 0)))
      : [el("tr", {}, el("td", { class: "quiet", colspan: "9" }, "none"))])
  );
  $("#cache tbody").replaceChildren(
    ...d.cache.map((c) => el("tr", {}, el("td", {}, c.informer), el("td", { class: "num" }, c.objects), el("td", { class: c.synced ? "ok" : "bad" }, c.synced ? "synced" : "syncing")))
  );
}

function renderErrors(d) {
  $("#failing-count").textContent = d.failing ? d.failing : "";
  $("#no-errors").style.display = d.groups.length ? "none" : "";
  $("#error-groups").replaceChildren(
    ...d.groups.map((g) =>
      el("div", { class: "group" },
        el("h3", {}, g.error),
        el("table", {},
          el("thead", {}, el("tr", {}, ...["object", "kind", "controller", "attempts", "failing since", "next retry"].map((h) => el("th", {}, h)))),
          el("tbody", {}, ...g.objects.map((o) =>
            el("tr", { class: "failing-object" },
              el("td", {}, objectLink(o.kind, o.namespace, o.name)), el("td", {}, o.kind), el("td", {}, o.controller),
              el("td", { class: "num" }, o.attempts), el("td", {}, when(o.since)), el("td", {}, o.terminal ? "terminal: not retried" : until(o.next_retry)))))),
        g.more ? el("p", { class: "quiet" }, `and ${g.more} more objects`) : null,
        el("details", {}, el("summary", {}, "traceback"), el("pre", {}, g.traceback)))),
    ...(d.more_groups ? [el("p", { class: "quiet" }, `and ${d.more_groups} more errors`)] : [])
  );
}

function tree(nodes) {
  if (!nodes.length) return null;
  return el("ul", { class: "tree" }, ...nodes.map((n) => el("li", { class: "owned" }, `${n.kind} `, objectLink(n.kind, n.namespace, n.name), tree(n.owned))));
}

function renderObject(d) {
  const box = $("#object");
  if (!d.query.kind || !d.query.name) {
    box.replaceChildren(el("h2", {}, "Recently reconciled"),
      el("ul", {}, ...(d.recent || []).map((k) => el("li", {}, `${k.kind} `, objectLink(k.kind, k.namespace, k.name)))));
    return;
  }
  const q = d.query;
  const rows = d.reconciles.map((r) =>
    el("tr", { class: "reconcile" },
      el("td", {}, when(r.started)), el("td", { class: "num" }, ms(r.seconds)),
      el("td", { class: r.error ? "bad" : "ok" }, r.outcome + (r.error ? ": " + r.error : "")),
      el("td", {}, r.requeue_after ? r.requeue_after + " s" : "–"), el("td", { class: "num writes" }, String(r.writes ?? 0)), el("td", {}, r.controller),
      el("td", {}, r.logs.length ? el("details", {}, el("summary", {}, `${r.logs.length} lines · ${r.reconcile_id}`),
        el("pre", {}, r.logs.map((l) => `${new Date(l.time * 1000).toLocaleTimeString()} ${l.level} ${l.message}`).join("\n"))) : r.reconcile_id)));
  box.replaceChildren(...[
    el("h2", {}, `${d.kind || q.kind} ${q.namespace ? q.namespace + "/" : ""}${q.name}`, d.found ? "" : el("span", { class: "quiet" }, " (not in the cache)")),
    d.failing.length ? el("p", { class: "bad" }, ...d.failing.map((f) => `failing: ${f.error} (attempt ${f.attempts}, retry ${until(f.next_retry)})`)) : null,
    el("h2", {}, "Last reconciles"),
    el("table", { id: "reconciles" }, el("thead", {}, el("tr", {}, ...["time", "duration", "result", "requeue", "writes", "controller", "log"].map((h) => el("th", {}, h)))), el("tbody", {}, ...rows)),
    el("div", { class: "grid" },
      el("div", { id: "conditions" }, el("h2", {}, "Conditions"),
        d.conditions.length ? el("table", {}, el("tbody", {}, ...d.conditions.map((c) => el("tr", {}, el("td", {}, c.type), el("td", { class: c.status === "True" ? "ok" : "bad" }, c.status), el("td", {}, c.reason || ""), el("td", {}, c.message || ""))))) : el("p", { class: "quiet" }, "none")),
      el("div", {}, el("h2", {}, "Owner and owned"),
        d.owners.length ? el("p", {}, "owned by ", ...d.owners.map((o) => `${o.kind} ${o.name}`)) : el("p", { class: "quiet" }, "no owner"),
        el("div", { id: "owned" }, tree(d.owned) || el("p", { class: "quiet" }, "owns nothing in the cache"))),
      el("div", {}, el("h2", {}, "Replica"), el("dl", {}, ...Object.entries(d.replica).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])),
        el("h2", {}, "Owned by"), el("table", { id: "shard-owner" }, el("tbody", {}, ...(d.owner || []).map((o) =>
          el("tr", { class: "shard-owner" }, el("td", {}, o.controller),
            el("td", { class: o.this_replica ? "ok" : "" }, o.this_replica && o.replica !== "this replica" ? `${o.replica} (this replica)` : o.replica),
            el("td", { class: "quiet" }, o.ring ? `ring ${o.ring} generation ${o.generation}, key ${o.key}` : ""))))))),
    el("h2", {}, "Events"),
    el("div", { id: "events" }, d.events.length ? el("table", {}, el("tbody", {}, ...d.events.map((e) => el("tr", {}, el("td", { class: e.type === "Warning" ? "bad" : "" }, e.type), el("td", {}, e.reason), el("td", {}, e.message), el("td", { class: "num" }, "×" + e.count))))) : el("p", { class: "quiet" }, "none")),
  ].filter((child) => child !== null));
}

const pages = { overview: renderOverview, errors: renderErrors, object: renderObject };

function show() {
  const [name, query] = (location.hash.slice(1) || "overview").split("?");
  const page = pages[name] ? name : "overview";
  for (const p of Object.keys(pages)) {
    $("#page-" + p).classList.toggle("active", p === page);
    $("#tab-" + p).classList.toggle("active", p === page);
  }
  if (page === "object") {
    const params = new URLSearchParams(query || "");
    for (const field of ["kind", "namespace", "name"]) $(`#search [name=${field}]`).value = params.get(field) || "";
  }
  if (source) source.close();
  source = new EventSource(`/events/${page}${query ? "?" + query : ""}`);
  const live = $("#live");
  source.addEventListener("open", () => { live.textContent = "live"; live.className = "live on"; });
  source.addEventListener("error", () => { live.textContent = "reconnecting"; live.className = "live off"; });
  source.addEventListener("snapshot", (e) => { pages[page](JSON.parse(e.data)); document.body.dataset.updated = Date.now(); });
}

$("#search").addEventListener("submit", (e) => {
  e.preventDefault();
  const form = new FormData(e.target);
  location.hash = "object?" + new URLSearchParams({ kind: form.get("kind"), namespace: form.get("namespace"), name: form.get("name") });
});
window.addEventListener("hashchange", show);
show();
