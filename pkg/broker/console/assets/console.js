// console.js: the web console's page logic. No framework and no build
// step: the streams view polls /stats once a second; the stream view reads
// a stream through /streamcast.js, the same protocol every client speaks.
import { Subscription } from "./streamcast.js";

const $ = (sel) => document.querySelector(sel);
const HISTORY_S = 300; // the sparkline's window: 5 minutes
const ROW_PX = 20; // one tail row's height; must match .trow in console.css
const KEEP = 20000; // tail rows kept in memory; the DOM holds only the visible ones

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
const fmtInt = (v) => (v === null || v === undefined ? "–" : Number(v).toLocaleString("en-US"));
function fmtSecs(s) {
  if (s === null || s === undefined) return "–";
  if (s < 1) return "0 s";
  if (s < 120) return Math.round(s) + " s";
  if (s < 7200) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}
function fmtTs(us) {
  return new Date(us / 1000).toISOString().replace("T", " ").replace("Z", "");
}
function banner(msg) {
  const b = $("#banner");
  b.hidden = !msg;
  b.textContent = msg || "";
}

// ---- streams view ----------------------------------------------------

class StreamsView {
  constructor() {
    this.hist = new Map(); // stream name → [{t, end, lagS}], oldest first
    this.restarts = new Map(); // role → [{t, restarts}]
    this.timer = null;
  }

  start() {
    $("#streams-view").hidden = false;
    $("#crumbs").textContent = "streams";
    this.poll();
    this.timer = setInterval(() => this.poll(), 1000);
  }

  stop() {
    clearInterval(this.timer);
    $("#streams-view").hidden = true;
  }

  async poll() {
    // The server writes its stats: path into the page; "" when it serves
    // no stats.
    const stats = document.querySelector('meta[name="streamcast-stats"]')?.content ?? "/stats";
    if (stats === "") {
      banner("this server serves no stats (stats: false in its config), so the console has no streams to list; open a stream by its name instead");
      return;
    }
    let doc;
    try {
      const res = await fetch(stats, { cache: "no-store", credentials: "same-origin" });
      if (res.status === 401 || res.status === 403) {
        banner(`${stats} refused this user (${res.status}): ${(await res.text()).trim()}`);
        return;
      }
      if (!res.ok) {
        banner(`${stats} answered ${res.status}; the table shows the last figures it had`);
        return;
      }
      doc = await res.json();
    } catch (e) {
      banner(`cannot reach ${stats} (${e.message}); the table shows the last figures it had`);
      return;
    }
    banner("");
    this.render(doc);
  }

  remember(doc) {
    const t = doc.served_at;
    for (const s of doc.streams) {
      let h = this.hist.get(s.name);
      if (!h) this.hist.set(s.name, (h = []));
      h.push({ t, end: s.end_offset, lagS: s.publish_lag_s });
      while (h.length && h[0].t < t - HISTORY_S) h.shift();
    }
    for (const c of doc.children ?? []) {
      let h = this.restarts.get(c.role);
      if (!h) this.restarts.set(c.role, (h = []));
      h.push({ t, restarts: c.restarts });
      while (h.length && h[0].t < t - HISTORY_S) h.shift();
    }
  }

  // rates are rows/s between successive samples of a stream's end offset.
  rates(name) {
    const h = this.hist.get(name) ?? [];
    const out = [];
    for (let i = 1; i < h.length; i++) {
      const dt = h[i].t - h[i - 1].t;
      if (h[i].end === null || h[i - 1].end === null || dt <= 0) continue;
      out.push({ t: h[i].t, r: Math.max(0, (h[i].end - h[i - 1].end) / dt) });
    }
    return out;
  }

  spark(rates, now) {
    const w = 120, hgt = 18;
    if (rates.length < 2) return `<svg class="spark" width="${w}" height="${hgt}"></svg>`;
    const max = Math.max(1, ...rates.map((p) => p.r));
    const pts = rates.map((p) => `${(w - ((now - p.t) / HISTORY_S) * w).toFixed(1)},${(hgt - 1 - (p.r / max) * (hgt - 2)).toFixed(1)}`);
    return `<svg class="spark" width="${w}" height="${hgt}" viewBox="0 0 ${w} ${hgt}"><title>max ${Math.round(max)} rows/s</title><polyline points="${pts.join(" ")}"/></svg>`;
  }

  // childHealth says, per role, whether a maintenance child is in trouble
  // now: down, not ready, or restarted within the window.
  childHealth(doc) {
    const out = [];
    for (const c of doc.children ?? []) {
      const h = this.restarts.get(c.role) ?? [];
      const recent = h.length ? c.restarts - h[0].restarts : 0;
      let cls = "ok", why = "ready";
      if (c.pid === null) (cls = "bad"), (why = "down, restarting");
      else if (!c.ready) (cls = "bad"), (why = "not ready");
      else if (recent > 0) (cls = "bad"), (why = `restarted ${recent}× in 5 min`);
      out.push({ role: c.role, cls, why, c });
    }
    return out;
  }

  // lagProblem flags a publish lag that keeps growing: nothing reached the
  // published table for a minute while rows waited.
  lagProblem(name, lagS) {
    if (lagS === null || lagS === undefined) return "";
    const h = this.hist.get(name) ?? [];
    const now = h.length ? h[h.length - 1].t : 0;
    const old = h.find((p) => p.t >= now - 60);
    const growing = old && old.lagS !== null && now - old.t >= 50 && lagS - old.lagS >= (now - old.t) * 0.8;
    if (growing && lagS > 120) return "bad";
    if (lagS > 300) return "warn";
    return "";
  }

  render(doc) {
    this.remember(doc);
    $("#served").textContent = "stats at " + new Date(doc.served_at * 1000).toLocaleTimeString();
    const health = this.childHealth(doc);
    $("#children").innerHTML = health
      .map((h) => `<span class="child ${h.cls === "bad" ? "bad" : ""}" title="${esc(h.c.last_error ?? "no error")}">maintain ${esc(h.role)}: <span class="${h.cls}">${esc(h.why)}</span>${h.c.restarts ? `, ${h.c.restarts} restarts` : ""}</span>`)
      .join("");
    const sick = health.filter((h) => h.cls === "bad");
    const rows = [];
    for (const s of doc.streams) {
      const rates = this.rates(s.name);
      const rate = rates.length ? rates[rates.length - 1].r : null;
      const lag = this.lagProblem(s.name, s.publish_lag_s);
      let maint = "–", maintCls = "";
      if (s.durable && doc.children) {
        maint = sick.length ? sick.map((h) => `${h.role} ${h.why}`).join("; ") : health.length ? "ok" : "none running";
        maintCls = sick.length ? "bad" : "";
      }
      const bad = lag === "bad" || maintCls === "bad";
      const href = "#/s/" + encodeURIComponent(s.name);
      rows.push(`<tr class="${bad ? "bad" : ""}" data-stream="${esc(s.name)}">
<td><a href="${href}">${s.name === "" ? "<i>(empty name)</i>" : esc(s.name)}</a></td>
<td>${s.durable ? "durable" : "live"}</td>
<td class="num end">${fmtInt(s.end_offset)}</td>
<td>${this.spark(rates, doc.served_at)} <span class="num">${rate === null ? "" : fmtInt(Math.round(rate))}</span></td>
<td class="num">${fmtInt(s.subscribers)}</td>
<td class="num">${fmtInt(s.publishers)}</td>
<td class="num">${fmtInt(s.buffered_rows)}</td>
<td class="num">${fmtInt(s.local_files)}</td>
<td class="num">${fmtInt(s.published_through)}</td>
<td class="num ${lag}">${s.publish_lag_rows === null || s.publish_lag_rows === undefined ? "–" : `${fmtInt(s.publish_lag_rows)} rows, ${fmtSecs(s.publish_lag_s)}`}</td>
<td class="${maintCls}">${esc(maint)}</td></tr>`);
    }
    $("#streams tbody").innerHTML = rows.join("");
    $("#streams").dataset.servedAt = doc.served_at;
    $("#streams-empty").hidden = doc.streams.length > 0;
    for (const name of this.hist.keys()) {
      if (!doc.streams.some((s) => s.name === name)) this.hist.delete(name);
    }
  }
}

// ---- stream view -----------------------------------------------------

class StreamView {
  constructor(name) {
    this.name = name;
    this.sub = null;
    this.ring = new Array(KEEP);
    this.head = 0; // index of the oldest kept row
    this.kept = 0;
    this.received = 0;
    this.columns = null;
    this.paused = false;
    this.next = null;
    this.drawPending = false;
    this.onScroll = () => this.schedule();
  }

  start() {
    $("#stream-view").hidden = false;
    $("#crumbs").innerHTML = `<a href="#">streams</a> / ${esc(this.name)}`;
    $("#stream-name").textContent = this.name === "" ? "(the stream at /)" : this.name;
    $("#tail-form").onsubmit = (e) => {
      e.preventDefault();
      this.subscribe();
    };
    $("#tail-pause").onclick = () => (this.paused ? this.resume() : this.pause());
    $(".tail-body").addEventListener("scroll", this.onScroll);
    // Each stream starts live and unfiltered: an offset or filter typed
    // for another stream means nothing here.
    $("#tail-offset").value = "";
    $("#tail-where").value = "";
    this.drawHead();
    this.subscribe();
  }

  stop() {
    if (this.sub) this.sub.close();
    this.sub = null;
    $(".tail-body").removeEventListener("scroll", this.onScroll);
    $("#stream-view").hidden = true;
    $("#schema tbody").innerHTML = "";
    $("#greeting").textContent = "";
    $("#tail-status").textContent = "";
    Object.assign($("#tail").dataset, { received: 0, kept: 0, first: "", last: "" });
    $("#tail-log").innerHTML = "";
    $(".tail-rows").innerHTML = "";
    $("#tail-error").hidden = true;
  }

  target() {
    return this.name === "" ? "./" : "./" + encodeURIComponent(this.name);
  }

  log(msg, bad) {
    const li = document.createElement("li");
    li.textContent = new Date().toLocaleTimeString() + "  " + msg;
    if (bad) li.className = "bad";
    const ol = $("#tail-log");
    ol.prepend(li);
    while (ol.children.length > 50) ol.lastChild.remove();
  }

  // subscribe starts a new tail from the form's offset and filter.
  subscribe() {
    const offText = $("#tail-offset").value.trim();
    const whereText = $("#tail-where").value.trim();
    let offset = null;
    if (offText === "earliest") offset = 0;
    else if (offText !== "") {
      if (!/^\d+$/.test(offText)) return this.refused(`offset "${offText}" is not a whole number; leave it empty to read live, or 0 for the earliest row kept`);
      offset = Number(offText);
    }
    let where = null;
    if (whereText !== "") {
      try {
        JSON.parse(whereText);
      } catch (e) {
        return this.refused(`where is not JSON (${e.message}); write an object such as {"symbol":"BTC-USD"}`);
      }
      where = whereText;
    }
    this.clear();
    this.paused = false;
    this.where = where;
    this.open(offset);
  }

  open(offset) {
    if (this.sub) this.sub.close();
    $("#tail-error").hidden = true;
    const sub = new Subscription(this.target(), { offset, where: this.where, onRow: (r) => this.add(r) });
    this.sub = sub;
    sub.addEventListener("greeting", (e) => this.greet(e.detail));
    sub.addEventListener("state", () => this.status());
    sub.addEventListener("resume", (e) => {
      const d = e.detail;
      if (d.code === 4429) this.log(`${d.message}; the tail resumed there, nothing is lost`, true);
      else this.log(`${d.message}; reconnecting from offset ${d.offset ?? "live"}`);
    });
    sub.addEventListener("error", (e) => this.refused(e.detail.message));
    $("#tail-pause").disabled = false;
    $("#tail-pause").textContent = "Pause";
    this.status();
  }

  refused(msg) {
    const el = $("#tail-error");
    el.hidden = false;
    el.textContent = msg;
    this.log(msg, true);
    this.status();
  }

  pause() {
    if (!this.sub) return;
    this.next = this.sub.next;
    this.sub.close();
    this.sub = null;
    this.paused = true;
    $("#tail-pause").textContent = "Resume";
    this.log(this.next === null ? "paused (live-only stream: rows sent while paused are not shown)" : `paused; resume reads from offset ${this.next}`);
    this.status();
  }

  resume() {
    this.paused = false;
    this.open(this.next);
  }

  greet(g) {
    const props = g.schema && g.schema.properties ? g.schema.properties : null;
    const cols = props ? Object.keys(props) : null;
    if (JSON.stringify(cols) !== JSON.stringify(this.columns)) {
      this.columns = cols;
      this.drawHead();
    }
    const req = new Set(g.schema && g.schema.required ? g.schema.required : []);
    $("#schema tbody").innerHTML = props
      ? cols.map((c, i) => {
          const p = props[c];
          const types = [].concat(p.type ?? "any");
          const nullable = types.includes("null") || !req.has(c);
          const t = types.filter((x) => x !== "null").join("|") + (p.format ? ` (${p.format})` : "") + (p.contentEncoding ? ` (${p.contentEncoding})` : "");
          return `<tr><td class="num">${i + 1}</td><td>${esc(c)}</td><td>${esc(t)}</td><td>${nullable ? "yes" : ""}</td></tr>`;
        }).join("")
      : `<tr><td colspan="4" class="muted">no schema: rows are any JSON object</td></tr>`;
    $("#greeting").textContent = `${g.durable ? "durable" : "live-only"} · end offset ${fmtInt(g.end_offset)}` +
      (g.replay ? ` · replaying [${g.replay[0]}, ${g.replay[1]})` : "") + (g.where ? ` · where ${JSON.stringify(g.where)}` : "") +
      (g.stream_id ? ` · id ${g.stream_id}` : "");
    this.status();
  }

  drawHead() {
    const cols = this.columns ?? ["row"];
    $(".tail-head").innerHTML = `<span class="o">offset</span><span class="t">ts (UTC)</span>` + cols.map((c) => `<span>${esc(c)}</span>`).join("");
  }

  clear() {
    this.head = this.kept = this.received = 0;
    this.ring.fill(undefined);
    this.schedule();
  }

  add(r) {
    this.received++;
    if (this.kept < KEEP) {
      this.ring[(this.head + this.kept) % KEEP] = r;
      this.kept++;
    } else {
      this.ring[this.head] = r;
      this.head = (this.head + 1) % KEEP;
    }
    this.schedule();
  }

  at(i) {
    return this.ring[(this.head + i) % KEEP];
  }

  // schedule draws once per animation frame, however many rows arrived:
  // at 20k rows/s that is ~330 rows a frame and one DOM update.
  schedule() {
    if (this.drawPending) return;
    this.drawPending = true;
    requestAnimationFrame(() => {
      this.drawPending = false;
      this.draw();
    });
  }

  draw() {
    const body = $(".tail-body");
    $(".tail-spacer").style.height = this.kept * ROW_PX + "px";
    if ($("#tail-follow").checked && !this.paused) body.scrollTop = body.scrollHeight;
    const first = Math.max(0, Math.floor(body.scrollTop / ROW_PX));
    const n = Math.min(this.kept - first, Math.ceil(body.clientHeight / ROW_PX) + 1);
    const cols = this.columns;
    const html = [];
    for (let i = 0; i < n; i++) {
      const r = this.at(first + i);
      let cells;
      if (cols) {
        const row = r.row;
        cells = cols.map((c) => {
          const v = row[c];
          const s = v !== null && typeof v === "object" ? JSON.stringify(v) : String(v);
          return `<span title="${esc(s)}">${esc(s)}</span>`;
        }).join("");
      } else {
        const s = JSON.stringify(r.row);
        cells = `<span title="${esc(s)}">${esc(s)}</span>`;
      }
      html.push(`<div class="trow" data-offset="${r.offset}"><span class="o">${r.offset ?? "–"}</span><span class="t">${fmtTs(r.ts)}</span>${cells}</div>`);
    }
    const rowsEl = $(".tail-rows");
    rowsEl.style.transform = `translateY(${first * ROW_PX}px)`;
    rowsEl.innerHTML = html.join("");
    this.status();
  }

  status() {
    const tail = $("#tail");
    const firstRow = this.kept ? this.at(0) : null, lastRow = this.kept ? this.at(this.kept - 1) : null;
    tail.dataset.received = this.received;
    tail.dataset.kept = this.kept;
    tail.dataset.first = firstRow ? firstRow.offset : "";
    tail.dataset.last = lastRow ? lastRow.offset : "";
    let state = this.paused ? "paused" : this.sub ? this.sub.state : "stopped";
    if (this.sub && this.sub.attempts > 1 && state !== "open" && state !== "closed") {
      state += ` (attempt ${this.sub.attempts}: the server is unreachable, or refuses this user the stream)`;
    }
    $("#tail-status").textContent = `${state} · ${fmtInt(this.received)} rows received` +
      (this.kept ? ` · showing offsets ${firstRow.offset ?? "–"}–${lastRow.offset ?? "–"} (${fmtInt(this.kept)} kept)` : "");
  }
}

// ---- routing ---------------------------------------------------------

let view = null;
function route() {
  if (view) view.stop();
  const m = location.hash.match(/^#\/s\/(.*)$/);
  view = m ? new StreamView(decodeURIComponent(m[1])) : new StreamsView();
  view.start();
}
window.addEventListener("hashchange", route);
route();

