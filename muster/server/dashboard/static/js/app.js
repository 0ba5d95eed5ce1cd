// The dashboard: a hash router over the pages, the sidebar, and the live connection.

import { logout, whoami } from "./api.js";
import { h, put } from "./dom.js";
import { startLive } from "./live.js";
import overview from "./pages/overview.js";
import jobs from "./pages/jobs.js";
import job from "./pages/job.js";
import queues from "./pages/queues.js";
import nodes from "./pages/nodes.js";
import workflows from "./pages/workflows.js";
import workflow from "./pages/workflow.js";
import cost from "./pages/cost.js";
import experiments from "./pages/experiments.js";
import experiment from "./pages/experiment.js";
import serving from "./pages/serving.js";

// [pattern, section in the sidebar, page]. A page is (root, params) -> dispose function.
const ROUTES = [
  [/^\/?$/, "overview", overview],
  [/^\/jobs$/, "jobs", jobs],
  [/^\/jobs\/([^/]+)\/([^/]+)$/, "jobs", job],
  [/^\/workflows$/, "workflows", workflows],
  [/^\/workflows\/([^/]+)\/([^/]+)$/, "workflows", workflow],
  [/^\/experiments$/, "experiments", experiments],
  [/^\/experiments\/([^/]+)\/([^/]+)$/, "experiments", experiment],
  [/^\/serving$/, "serving", serving],
  [/^\/queues$/, "queues", queues],
  [/^\/nodes$/, "nodes", nodes],
  [/^\/cost$/, "cost", cost],
];

const main = document.getElementById("main");
let dispose = null;

function route() {
  if (dispose) dispose();
  dispose = null;
  const path = decodeURIComponent(window.location.hash.replace(/^#/, "").split("?")[0]) || "/";
  const query = new URLSearchParams(window.location.hash.split("?")[1] || "");
  for (const [pattern, section, page] of ROUTES) {
    const m = pattern.exec(path);
    if (!m) continue;
    document.querySelectorAll(".nav-link").forEach((a) => a.classList.toggle("active", a.dataset.section === section));
    const named = m.slice(1).map(decodeURIComponent).reverse().join(" · ");
    document.title = `${named || document.querySelector(`.nav-link[data-section="${section}"]`).textContent} · Muster`;
    put(main);
    main.scrollTop = 0;
    dispose = page(main, m.slice(1), query);
    return;
  }
  put(main, h("div", { class: "page" }, h("h1", {}, "Not found"), h("p", {}, "No page at ", h("code", {}, path), ". ", h("a", { href: "#/" }, "Back to the overview"))));
}

document.getElementById("logout").addEventListener("click", logout);
whoami().then((me) => {
  const el = document.getElementById("whoami");
  el.textContent = me.username;
  el.title = `Signed in as ${me.username} (${(me.groups || []).join(", ")})`;
}).catch(() => { /* the pages say what failed */ });
window.addEventListener("hashchange", route);
startLive(document.getElementById("live"));
route();
