// streamcast.js: a dependency-free browser client for streamcast's
// protocol 4, served by `streamcast serve` at /streamcast.js.
//
//   import { Subscription } from "/streamcast.js";
//   const sub = new Subscription("trades", {
//     offset: 0,                        // omit to start live, 0 = earliest
//     where: { symbol: "BTC-USD" },     // optional filter
//     onRow: (r) => console.log(r.offset, r.ts, r.row),
//   });
//   sub.addEventListener("greeting", (e) => console.log(e.detail));
//   sub.addEventListener("error", (e) => console.log(e.detail.message));
//   sub.close();
//
// The subscription reconnects with backoff when the connection drops or the
// server says 1001 (going away), and resumes at the offset after the last
// row it delivered, so no row is missed or delivered twice. Dropped with
// 4429 (too slow) it resumes at the offset the server names. A refusal it
// cannot get past (4416 not replayable, 4400, 4404, ...) ends it with an
// "error" event whose detail is a Refusal carrying the close code and the
// reason's numbers.

/** Close codes of protocol 4. */
export const Close = Object.freeze({
  Normal: 1000,
  GoingAway: 1001,
  TooBig: 1009,
  BadRequest: 4400,
  NoSuchStream: 4404,
  Superseded: 4409,
  Retired: 4410,
  ExactlyOnceUnavailable: 4412,
  NotReplayable: 4416,
  TooSlow: 4429,
});

/** Protocol versions this client reads. */
const protocols = [4, 5];

/**
 * Refusal is a close the subscription cannot get past: code is the close
 * code, reason the decoded JSON reason ({} when it was not JSON), and for
 * 4416 why, offset, earliest, endOffset and maxReplay carry its numbers
 * (null when the reason left them out).
 */
export class Refusal extends Error {
  constructor(code, reason, raw) {
    super(describe(code, reason, raw));
    this.name = "Refusal";
    this.code = code;
    this.reason = reason;
    this.why = reason.why ?? null;
    this.offset = reason.offset ?? null;
    this.earliest = reason.earliest ?? null;
    this.endOffset = reason.end_offset ?? null;
    this.maxReplay = reason.max_replay ?? null;
  }
}

/** describe words a close for a person, with its numbers. */
export function describe(code, reason, raw) {
  const n = (v) => (v === undefined || v === null ? "?" : String(v));
  switch (code) {
    case Close.NotReplayable:
      switch (reason.why) {
        case "not_durable":
          return "4416 not replayable: this stream is live-only and keeps no offsets; subscribe without an offset";
        case "empty":
          return "4416 not replayable: the stream's log holds no rows to replay; subscribe without an offset";
        case "ahead":
          return `4416 not replayable: offset ${n(reason.offset)} is past ${n(reason.end_offset)}, the next offset this stream will assign; resume from ${n(reason.end_offset)} or earlier`;
        case "too_old":
          return `4416 not replayable: offset ${n(reason.offset)} is more than max_replay=${n(reason.max_replay)} rows behind the frontier ${n(reason.end_offset)}; resume from offset ${reason.end_offset != null && reason.max_replay != null ? reason.end_offset - reason.max_replay : "?"} or later`;
        case "evicted":
          return `4416 not replayable: offset ${n(reason.offset)} is below ${n(reason.earliest)}, the earliest offset this stream still serves; resume from ${n(reason.earliest)}`;
        default:
          return `4416 not replayable from offset ${n(reason.offset)} (${n(reason.why)})`;
      }
    case Close.TooSlow:
      return `4429 too slow: dropped ${n(reason.behind)} frames behind; resuming at offset ${n(reason.offset)}`;
    case Close.BadRequest:
      return `4400 bad request: ${reason.detail ?? raw}`;
    case Close.NoSuchStream:
      return `4404 no such stream; this server serves ${(reason.serves ?? []).join(", ") || "no stream you may read"}`;
    case Close.Retired:
      return `4410 retired at offset ${n(reason.end_offset)}`;
    case Close.GoingAway:
      return `1001 going away (${n(reason.why)})`;
    default:
      return `closed with ${code}${raw ? ": " + raw : ""}`;
  }
}

/**
 * Row is one data frame, [offset, ts_us, row]. offset and ts are numbers
 * (offset is null on a live-only stream); raw is the frame's text exactly
 * as the server sent it; row parses the row's JSON on first use. An
 * integer column past 2^53 loses precision in row: read it from raw.
 */
export class Row {
  constructor(raw, offset, ts) {
    this.raw = raw;
    this.offset = offset;
    this.ts = ts;
    this._row = undefined;
  }
  get row() {
    if (this._row === undefined) this._row = JSON.parse(this.raw)[2];
    return this._row;
  }
}

// frameHead reads the offset and stamp of a data frame without parsing its
// row: the client sees every frame, the page usually shows few of them.
function frameHead(text) {
  const a = text.indexOf(",");
  const b = text.indexOf(",", a + 1);
  if (text[0] !== "[" || a < 0 || b < 0) throw new Error("not a data frame: " + text.slice(0, 80));
  const o = text.slice(1, a);
  const offset = o === "null" ? null : Number(o);
  const ts = Number(text.slice(a + 1, b));
  if ((offset !== null && !Number.isSafeInteger(offset)) || !Number.isFinite(ts)) {
    throw new Error("not a data frame: " + text.slice(0, 80));
  }
  return [offset, ts];
}

/** streamURL resolves a stream name or URL against the page's location. */
export function streamURL(target) {
  if (/^wss?:\/\//i.test(target)) return target;
  const u = new URL(target, globalThis.location?.href);
  u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
  return u.href;
}

function parseReason(raw) {
  try {
    const r = JSON.parse(raw);
    return r && typeof r === "object" ? r : {};
  } catch {
    return {};
  }
}

/**
 * Subscription reads a stream from an offset (or live) and keeps reading
 * across reconnects. Events: "greeting" (detail: the greeting object),
 * "state" (detail: "connecting" | "open" | "waiting" | "closed"), "resume"
 * (detail: {code, reason, offset}: a drop it recovers from), "error"
 * (detail: an Error; the subscription has ended). Rows go to onRow, one
 * call per row, in offset order.
 *
 * Properties: greeting (the last greeting), next (the offset the next
 * connection asks for; null: live), rows (rows delivered), state, and
 * attempts (connections tried since the last greeting; a browser does not
 * tell a page why a WebSocket handshake failed, so a refused login or a
 * missing grant shows only as attempts that keep failing).
 *
 * Options: offset (a number; omit for live, 0 for the earliest row), where
 * (an object or a JSON string), onRow(row), minDelay and maxDelay (the
 * reconnect backoff, ms; 250 and 10000), WebSocket (a constructor, for
 * tests or non-browser hosts).
 */
export class Subscription extends EventTarget {
  constructor(target, options = {}) {
    super();
    this.url = streamURL(target).replace(/[?#].*$/, "");
    this.where = options.where === undefined || options.where === null ? null
      : typeof options.where === "string" ? options.where : JSON.stringify(options.where);
    this.next = options.offset ?? null; // offset to resume at; null: live
    this.onRow = options.onRow ?? (() => {});
    this.minDelay = options.minDelay ?? 250;
    this.maxDelay = options.maxDelay ?? 10000;
    this.greeting = null;
    this.state = "connecting";
    this.rows = 0;
    this._WS = options.WebSocket ?? globalThis.WebSocket;
    this.attempts = 0;
    this._ws = null;
    this._timer = null;
    this._closed = false;
    this._connect();
  }

  /** requestURL is the URL of the next connection: the resume offset and filter. */
  requestURL() {
    const q = [];
    if (this.next !== null) q.push("offset=" + this.next);
    if (this.where !== null) q.push("where=" + encodeURIComponent(this.where));
    return q.length ? this.url + "?" + q.join("&") : this.url;
  }

  /** close ends the subscription; no event follows but "state" closed. */
  close() {
    if (this._closed) return;
    this._closed = true;
    clearTimeout(this._timer);
    if (this._ws) {
      this._ws.onclose = this._ws.onmessage = this._ws.onerror = null;
      this._ws.close(1000);
      this._ws = null;
    }
    this._setState("closed");
  }

  _setState(s) {
    if (this.state === s) return;
    this.state = s;
    this.dispatchEvent(new CustomEvent("state", { detail: s }));
  }

  _connect() {
    if (this._closed) return;
    this._setState("connecting");
    let ws;
    try {
      ws = new this._WS(this.requestURL());
    } catch (e) {
      this._fail(e);
      return;
    }
    this._ws = ws;
    let greeted = false;
    ws.onmessage = (ev) => {
      if (this._ws !== ws) return;
      const text = typeof ev.data === "string" ? ev.data : "";
      try {
        if (!greeted) {
          greeted = true;
          this._greet(JSON.parse(text));
          return;
        }
        const [offset, ts] = frameHead(text);
        if (offset !== null && this.last !== undefined && this.last !== null && offset <= this.last) {
          throw new Error(`the server sent offset ${offset} after ${this.last}; offsets must increase`);
        }
        this.last = offset;
        if (offset !== null) this.next = offset + 1;
        this.rows++;
        this.onRow(new Row(text, offset, ts));
      } catch (e) {
        this._fail(e);
      }
    };
    ws.onclose = (ev) => {
      if (this._ws !== ws) return;
      this._ws = null;
      this._closedWith(ev.code, ev.reason);
    };
  }

  _greet(g) {
    if (!g || typeof g !== "object" || Array.isArray(g) || !protocols.includes(g.streamcast)) {
      throw new Error("the server's first frame is not a protocol 4 greeting");
    }
    this.greeting = g;
    this.attempts = 0;
    // A subscriber that started live and has received nothing resumes at
    // the frontier it attached at: rows committed while it reconnects are
    // still delivered. A live-only stream has no offsets to resume at.
    if (this.next === null && g.durable && g.end_offset !== null) this.next = g.end_offset;
    if (!g.durable) this.next = null;
    this._setState("open");
    this.dispatchEvent(new CustomEvent("greeting", { detail: g }));
  }

  _closedWith(code, raw) {
    const reason = parseReason(raw);
    switch (code) {
      case Close.TooSlow:
        // The reason names where to resume; a trimmed one may not, and then
        // the row after the last delivered is the same place.
        if (Number.isSafeInteger(reason.offset)) this.next = reason.offset;
        this.dispatchEvent(new CustomEvent("resume", { detail: { code, reason, offset: this.next, message: describe(code, reason, raw) } }));
        this._retry(true);
        return;
      case Close.Normal:
        this._setState("closed");
        this._closed = true;
        return;
      case Close.BadRequest:
      case Close.NoSuchStream:
      case Close.NotReplayable:
      case Close.Retired:
      case Close.Superseded:
      case Close.ExactlyOnceUnavailable:
      case Close.TooBig:
        this._fail(new Refusal(code, reason, raw));
        return;
      default:
        // 1001 (the server or stream is stopping), 1006 (the connection
        // dropped or was never made) and anything else: try again later.
        if (code === Close.GoingAway || this.greeting) {
          this.dispatchEvent(new CustomEvent("resume", { detail: { code, reason, offset: this.next, message: describe(code, reason, raw) } }));
        }
        this._retry(false);
    }
  }

  _retry(now) {
    if (this._closed) return;
    this._setState("waiting");
    const base = Math.min(this.maxDelay, this.minDelay * 2 ** Math.min(this.attempts, 16));
    this.attempts++;
    const delay = now && this.attempts === 1 ? 0 : base * (0.5 + Math.random() / 2);
    this._timer = setTimeout(() => this._connect(), delay);
  }

  _fail(err) {
    if (this._closed) return;
    this._closed = true;
    if (this._ws) {
      this._ws.onclose = this._ws.onmessage = null;
      this._ws.close(1000);
      this._ws = null;
    }
    this._setState("closed");
    this.dispatchEvent(new CustomEvent("error", { detail: err }));
  }
}

/** subscribe is new Subscription(target, options). */
export function subscribe(target, options) {
  return new Subscription(target, options);
}
