// Live refresh: one stream of change notices per tab (GET /ui/api/changes, see
// muster/server/dashboard/changes.py). A page says which kinds it shows; a notice about one of
// them refetches the page's view, at most one fetch in flight and one queued. After a
// reconnect every page refetches (notices may have been missed while disconnected).

import { streamLines } from "./api.js";

const listeners = new Set();
let statusEl = null;

export function startLive(el) {
  statusEl = el;
  connect(0);
}

/** Call fn() (async) now and whenever an object of one of `kinds` changes; returns a stop function. */
export function follow(kinds, fn) {
  const listener = { kinds: new Set(kinds), run: coalesced(fn) };
  listeners.add(listener);
  listener.run();
  const stop = () => { listeners.delete(listener); listener.run.stop(); };
  stop.refresh = listener.run; // fetch again now (a page whose query changed)
  return stop;
}

const SETTLE_MS = 150;

function coalesced(fn) {
  let running = false, again = false, stopped = false, timer = null, pause = SETTLE_MS;
  const run = async () => {
    if (stopped) return;
    if (running) { again = true; return; }
    running = true;
    const started = performance.now();
    try { await fn(); } catch (err) { if (!stopped) console.warn("refresh failed:", err); }
    // On a busy cluster a view takes a while to compute and changes never stop: wait twice as
    // long as the last fetch took, so one tab keeps the server busy a third of the time at most.
    pause = Math.max(SETTLE_MS, 2 * (performance.now() - started));
    running = false;
    if (again && !stopped) { again = false; schedule(); }
  };
  // A burst of notices (a job starting writes a dozen objects) becomes one refetch.
  const schedule = () => { if (!timer) timer = setTimeout(() => { timer = null; run(); }, pause); };
  run.schedule = schedule;
  run.stop = () => { stopped = true; clearTimeout(timer); };
  return run;
}

function setStatus(state, title) {
  if (!statusEl) return;
  statusEl.className = `live live-${state}`;
  statusEl.textContent = state === "on" ? "live" : state;
  statusEl.title = title;
}

async function connect(attempt) {
  let synced = false;
  try {
    await streamLines("/ui/api/changes", (notice) => {
      if (notice.type === "SYNC") {
        synced = true;
        setStatus("on", "Pages follow changes as they happen");
        if (attempt > 0) listeners.forEach((l) => l.run.schedule());
        attempt = 0;
        return;
      }
      if (notice.type === "ERROR") return;
      listeners.forEach((l) => { if (l.kinds.has(notice.kind)) l.run.schedule(); });
    });
  } catch (err) {
    // The server went away or restarted: try again, more slowly each time.
  }
  setStatus("reconnecting", "Lost the server; reconnecting");
  const delay = Math.min(10000, 500 * 2 ** Math.min(attempt, 5));
  setTimeout(() => connect(synced ? 1 : attempt + 1), delay);
}
