// Colours: one stable colour per job (the same job is the same colour on every page and
// every reload), and one per phase.

export function jobColor(key) {
  let hash = 2166136261;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  // FNV-1a alone leaves similar names with similar low bits: finish with murmur3's mixer.
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  const hue = (hash >>> 0) % 360;
  const band = ((hash >>> 0) >>> 9) % 3;
  // OKLCH: every hue equally light and vivid (HSL yellows wash out, blues go dark), and dark
  // enough for the white names drawn on the tiles.
  return `oklch(${[0.56, 0.5, 0.62][band]} 0.15 ${hue})`;
}

const PHASE = {
  Running: "running", Admitted: "running", Restarting: "warn", Evicting: "warn",
  Succeeded: "ok", Cached: "cached", Finished: "ok", Completed: "ok",
  Failed: "bad", Error: "bad",
  Queued: "wait", Pending: "wait", Created: "wait",
  Preempted: "preempt", Suspended: "idle", Skipped: "idle", Omitted: "idle",
  EarlyStopped: "idle", MetricsUnavailable: "bad", Killed: "idle",
  Ready: "ok", Starting: "wait", Draining: "warn", Stopping: "idle", ScaledToZero: "idle", NotReady: "wait",
};

export function phaseClass(phase) {
  return `phase-${PHASE[phase] || "idle"}`;
}
