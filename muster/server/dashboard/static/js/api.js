// Talking to the server. The session cookie (set by POST /login, HttpOnly) authenticates
// every request; writes also send X-Muster-CSRF, which the server requires of cookie-signed
// writes (docs/dashboard.md#security).

export const API = "/apis/muster.dev/v1";
const CSRF = { "X-Muster-CSRF": "1" };

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.reason = body && body.error && body.error.reason;
  }
}

function signedOut() {
  // The token is gone or was replaced: sign in again, then come back to this page.
  window.location.assign("/login" + window.location.hash);
  return new Promise(() => {}); // nothing after this runs
}

async function check(resp) {
  if (resp.status === 401) return signedOut();
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch { /* not JSON */ }
    throw new ApiError(resp.status, body);
  }
  return resp;
}

export async function getJSON(path, signal) {
  const resp = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin", signal });
  return (await check(resp)).json();
}

export async function send(method, path, body) {
  const resp = await fetch(path, {
    method,
    headers: { "Content-Type": "application/json", Accept: "application/json", ...CSRF },
    credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await check(resp)).status === 204 ? null : resp.json();
}

/** Stream a text response chunk by chunk into onText; resolves when the response ends. */
export async function streamText(path, onText, signal, accept = "text/plain") {
  const resp = await check(await fetch(path, { credentials: "same-origin", signal, headers: { Accept: accept } }));
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    onText(value);
  }
}

/** Stream NDJSON: one parsed object per line into onItem. */
export async function streamLines(path, onItem, signal) {
  let rest = "";
  await streamText(path, (text) => {
    rest += text;
    let nl;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const line = rest.slice(0, nl).trim();
      rest = rest.slice(nl + 1);
      if (line) onItem(JSON.parse(line));
    }
  }, signal, "application/x-ndjson");
}

export function objectPath(plural, namespace, name) {
  return `${API}/namespaces/${encodeURIComponent(namespace)}/${plural}/${encodeURIComponent(name)}`;
}

export async function logout() {
  await fetch("/logout", { method: "POST", credentials: "same-origin" });
  window.location.assign("/login");
}

/** Who the session is signed in as: {username, groups} (a SelfSubjectReview). */
export async function whoami() {
  const review = await send("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", {});
  return review.status.userInfo;
}

/** May the signed-in identity do it? (A SelfSubjectAccessReview; pages show only the buttons
 * that will work, and the server checks again when one is pressed.) */
export async function can(verb, resource, namespace, name, subresource) {
  const attrs = { verb, resource, namespace: namespace || "", name: name || "" };
  if (subresource) attrs.subresource = subresource;
  const review = await send("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", { spec: { resourceAttributes: attrs } });
  return Boolean(review.status.allowed);
}
