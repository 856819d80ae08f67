// A WebSocket client that is not streamcast's: node's ws, driven by
// pkg/broker's tests (nodews_test.go) one JSON command a line on stdin,
// answering one JSON event a line on stdout.
//
//   {"op":"open","name":N,"url":U,"deflate":bool}
//       -> {"ev":"open","name":N,"ext":…,"port":…} once the greeting
//          arrived: ext is the server's Sec-WebSocket-Extensions answer,
//          port the client's own
//   {"op":"pause","name":N} / {"op":"resume","name":N}
//       -> {"ev":"paused"|"resumed","name":N}   (ws.pause(): the socket is
//          not read, so the server's writes stall once the kernel's buffers fill)
//   {"op":"wait","name":N,"rows":K,"dump":bool}
//       -> {"ev":"rows","name":N,"count":…,"bytes":…,"close":…,"error":…,"rows":[…]}
//          once N has K data frames or was closed; bytes is what the socket
//          read after the greeting (frame headers included), at the moment
//          the K-th frame arrived; error is what ws failed on (a message
//          it could not inflate, say); rows (the frames, as text) only
//          with dump
//   {"op":"close","name":N} -> {"ev":"closed","name":N}
//
// ws offers permessage-deflate with context takeover both ways, as a
// browser does, and inflates each message with the history of the ones
// before it. deflate:false offers nothing: the plain subscriber.
'use strict';

const readline = require('readline');
const WebSocket = require('ws');

const subs = new Map();

function say(ev) {
  process.stdout.write(JSON.stringify(ev) + '\n');
}

function open(cmd) {
  const ws = new WebSocket(cmd.url, { perMessageDeflate: cmd.deflate });
  const s = { ws, ext: '', rows: [], greeted: false, base: 0, at: new Map(), close: null, error: undefined, waiters: [] };
  subs.set(cmd.name, s);
  ws.on('upgrade', (res) => {
    s.ext = res.headers['sec-websocket-extensions'] || '';
  });
  ws.on('message', (data) => {
    if (!s.greeted) {
      s.greeted = true;
      s.base = ws._socket.bytesRead;
      say({ ev: 'open', name: cmd.name, ext: s.ext, port: ws._socket.localPort, greeting: data.toString() });
      return;
    }
    s.rows.push(data.toString());
    s.at.set(s.rows.length, ws._socket.bytesRead - s.base);
    settle(cmd.name, s);
  });
  ws.on('close', (code, reason) => {
    s.close = { code, reason: reason.toString() };
    if (!s.greeted) {
      say({ ev: 'error', name: cmd.name, error: `closed ${code} ${reason} before the greeting` });
    }
    settle(cmd.name, s);
  });
  ws.on('error', (err) => {
    s.error = String(err);
    if (!s.greeted) {
      say({ ev: 'error', name: cmd.name, error: s.error });
    }
  });
}

// settle answers the waits that are met: enough rows, or the close.
function settle(name, s) {
  s.waiters = s.waiters.filter((w) => {
    if (s.rows.length < w.rows && s.close === null) {
      return true;
    }
    const n = Math.min(w.rows, s.rows.length);
    say({
      ev: 'rows', name, count: s.rows.length, bytes: s.at.get(n) || 0, close: s.close, error: s.error,
      rows: w.dump ? s.rows.slice(0, n) : undefined,
    });
    return false;
  });
}

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const cmd = JSON.parse(line);
  const s = subs.get(cmd.name);
  switch (cmd.op) {
    case 'open':
      open(cmd);
      break;
    case 'pause':
      s.ws.pause();
      say({ ev: 'paused', name: cmd.name });
      break;
    case 'resume':
      s.ws.resume();
      say({ ev: 'resumed', name: cmd.name });
      break;
    case 'wait':
      s.waiters.push({ rows: cmd.rows, dump: !!cmd.dump });
      settle(cmd.name, s);
      break;
    case 'close':
      s.ws.close();
      say({ ev: 'closed', name: cmd.name });
      break;
    default:
      say({ ev: 'error', name: cmd.name, error: `unknown op ${cmd.op}` });
  }
});
// The test closing stdin ends the harness, whatever is still open.
rl.on('close', () => process.exit(0));
