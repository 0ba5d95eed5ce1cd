// A live log tail: GET .../pods/{pod}/log?follow=true&tailLines=N streamed into a <pre>
// (the server ends the response when the container ends). Keeps the last MAX_LINES lines and
// sticks to the bottom unless the reader scrolled up.

import { ApiError, objectPath, streamText } from "./api.js";
import { h, put } from "./dom.js";

const MAX_LINES = 2000;
const TAIL_LINES = 500;

export class LogTail {
  constructor() {
    this.pre = h("pre", { class: "log", "aria-live": "polite", tabindex: 0 });
    this.state = h("span", { class: "log-state" });
    this.el = h("div", { class: "log-wrap" }, this.pre, h("div", { class: "log-foot" }, this.state));
    this.key = null;
    this.controller = null;
    this.lines = 0;
  }

  /** Follow `pod` (its container), or show `message` when there is nothing to follow. A call
   *  with the same target (`key`: pod + uid) keeps the stream that is open. */
  show({ namespace, pod, container, key, message }) {
    if (message !== undefined) {
      this.stop();
      this.key = null;
      put(this.pre);
      this.setState(message, "idle");
      return;
    }
    if (key === this.key) return;
    this.stop();
    this.key = key;
    put(this.pre);
    this.lines = 0;
    this.follow(namespace, pod, container);
  }

  async follow(namespace, pod, container) {
    const controller = new AbortController();
    this.controller = controller;
    const params = new URLSearchParams({ follow: "true", tailLines: String(TAIL_LINES) });
    if (container) params.set("container", container);
    this.setState(`following ${pod}`, "live");
    try {
      await streamText(`${objectPath("pods", namespace, pod)}/log?${params}`, (text) => this.append(text), controller.signal);
      if (this.controller === controller) this.setState(`${pod}: the container ended`, "ended");
    } catch (err) {
      if (controller.signal.aborted) return;
      const text = err instanceof ApiError && err.reason === "PodPending" ? "waiting for the pod to start" : `no log: ${err.message}`;
      this.setState(text, "idle");
      this.key = null; // try again on the next refresh
    }
  }

  append(text) {
    const stick = this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - 4;
    this.pre.append(document.createTextNode(text));
    this.lines += (text.match(/\n/g) || []).length;
    if (this.lines > MAX_LINES * 1.5) this.trim();
    if (stick) this.pre.scrollTop = this.pre.scrollHeight;
  }

  trim() {
    const all = this.pre.textContent.split("\n");
    const kept = all.slice(-MAX_LINES - 1);
    put(this.pre, kept.join("\n"));
    this.lines = kept.length - 1;
  }

  setState(text, kind) {
    this.state.textContent = text;
    this.state.className = `log-state log-${kind}`;
  }

  stop() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }
}
