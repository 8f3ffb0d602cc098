// no8s dashboard: live pages and actions. Plain JavaScript, no build step,
// nothing loaded from elsewhere. Without it the pages still work: they
// reload themselves (the meta refresh in <noscript>) and show state only.
//
// Live: the page listens to the agent's event stream (the URL in <main
// data-events>), and when an event concerns what it shows (a resource in
// <main data-ids>, else any), it fetches itself again and swaps the marked
// regions ([data-region]) for the new ones, at most once a second. When the
// stream drops it reconnects with backoff, and reads the page afresh once
// back, since events may have been missed meanwhile.
//
// Actions: buttons with data-url, which the server renders hidden and only
// for callers whose grants allow them, are shown here. A click asks for
// confirmation (and an optional reason) in a <dialog>, then posts JSON to
// the API with the browser's credentials, and tells the answer.
(function () {
  "use strict";

  const main = document.querySelector("main[data-region=main]");
  if (!main) {
    return;
  }
  const minInterval = 1000; // at most one page refresh a second
  const maxBackoff = 30000;

  // ---- Regions of the page ----

  // reveal shows what needs JavaScript: the action buttons and the note
  // that the page updates itself.
  function reveal(root) {
    for (const el of root.querySelectorAll("[data-actions], .live-note")) {
      el.hidden = false;
    }
  }

  // swap replaces each region of the page with the same region of doc,
  // keeping the focus on the same button when it is still there.
  function swap(doc) {
    const focused = document.activeElement;
    const focusURL = focused && main.contains(focused) ? focused.getAttribute("data-url") : null;
    for (const region of document.querySelectorAll("[data-region]")) {
      const fresh = doc.querySelector('[data-region="' + region.getAttribute("data-region") + '"]');
      if (!fresh) {
        continue;
      }
      for (const name of ["data-events", "data-ids"]) {
        if (fresh.hasAttribute(name)) {
          region.setAttribute(name, fresh.getAttribute(name));
        } else {
          region.removeAttribute(name);
        }
      }
      // A copy of the list first: adopting a node takes it out of fresh.
      region.replaceChildren(...Array.from(fresh.childNodes).map((n) => document.adoptNode(n)));
    }
    if (doc.title) {
      document.title = doc.title;
    }
    reveal(main);
    if (focusURL) {
      for (const b of main.querySelectorAll("button[data-url]")) {
        if (b.getAttribute("data-url") === focusURL) {
          b.focus();
        }
      }
    }
  }

  // ---- Refreshing, debounced ----

  let lastRefresh = 0;
  let timer = null;
  let inFlight = false;
  let again = false;
  let hiddenDirty = false;

  // schedule refreshes the page soon: at once when the last refresh is a
  // second old, else when it is; a hidden tab waits until it is shown.
  function schedule() {
    if (document.hidden) {
      hiddenDirty = true;
      return;
    }
    if (timer !== null) {
      return;
    }
    const wait = Math.max(0, lastRefresh + minInterval - Date.now());
    timer = setTimeout(() => {
      timer = null;
      refresh();
    }, wait);
  }

  async function refresh() {
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    lastRefresh = Date.now();
    try {
      const resp = await fetch(location.pathname + location.search, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "text/html" },
      });
      const type = resp.headers.get("Content-Type") || "";
      // An error page (the resource was deleted, the store is down) is
      // what a reload would show too; anything but HTML is not.
      if (type.startsWith("text/html")) {
        swap(new DOMParser().parseFromString(await resp.text(), "text/html"));
      }
    } catch (e) {
      // The agent is unreachable: the stream says so and reconnects.
    } finally {
      inFlight = false;
      if (again) {
        again = false;
        schedule();
      }
    }
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && hiddenDirty) {
      hiddenDirty = false;
      schedule();
    }
  });

  // ---- The event stream ----

  const indicator = document.getElementById("live");

  function setState(state, text) {
    if (!indicator) {
      return;
    }
    indicator.hidden = false;
    indicator.setAttribute("data-state", state);
    indicator.textContent = text;
  }

  // concerns reports whether a resource event is about what the page shows.
  function concerns(data) {
    const ids = main.getAttribute("data-ids");
    if (!ids) {
      return true;
    }
    try {
      const id = String(JSON.parse(data).id);
      return ids.split(" ").includes(id);
    } catch (e) {
      return true;
    }
  }

  let stream = null;
  let retry = null;
  let backoff = minInterval;
  // tried is set once a stream was opened or failed: every later one may
  // have missed changes.
  let tried = false;

  function connect() {
    const url = main.getAttribute("data-events");
    if (!url) {
      return;
    }
    const es = new EventSource(url);
    stream = es;
    retry = null;
    let reconnecting = tried;
    es.addEventListener("open", () => {
      setState("live", "live");
      backoff = minInterval;
      if (reconnecting) {
        // Changes made while the stream was down were not sent.
        schedule();
      }
      reconnecting = false;
      tried = true;
    });
    es.addEventListener("resource", (ev) => {
      if (concerns(ev.data)) {
        schedule();
      }
    });
    es.addEventListener("source", () => {
      if (!main.getAttribute("data-ids")) {
        schedule();
      }
    });
    es.addEventListener("resync", schedule);
    es.addEventListener("error", () => {
      // The browser's own retries keep a fixed pace and give up on an
      // HTTP error: reconnect here instead, backing off, with jitter so
      // that many pages do not come back at once.
      es.close();
      stream = null;
      tried = true;
      setState("reconnecting", "reconnecting…");
      const wait = backoff / 2 + Math.random() * (backoff / 2);
      backoff = Math.min(backoff * 2, maxBackoff);
      retry = setTimeout(connect, wait);
    });
  }

  // A page left for another may be kept, frozen, to come back to: its
  // stream would hold one of the few connections a browser opens to the
  // agent, and a few such pages would leave none for the next. So the
  // stream closes when the page is left, and opens again if it comes back.
  window.addEventListener("pagehide", () => {
    clearTimeout(retry);
    retry = null;
    if (stream) {
      stream.close();
      stream = null;
    }
  });
  window.addEventListener("pageshow", (ev) => {
    if (ev.persisted && !stream && main.getAttribute("data-events")) {
      tried = true;
      connect();
    }
  });

  // ---- Actions ----

  const dialog = document.getElementById("confirm-action");
  const result = document.getElementById("action-result");
  let pending = null;

  function tell(state, text) {
    if (!result) {
      return;
    }
    result.setAttribute("data-state", state);
    result.textContent = text;
    result.hidden = false;
  }

  function ask(button) {
    pending = {
      url: button.getAttribute("data-url"),
      label: button.textContent.trim(),
      done: button.getAttribute("data-done") || button.textContent.trim() + ": done.",
      reason: button.hasAttribute("data-reason"),
      revision: button.getAttribute("data-revision"),
    };
    const question = button.getAttribute("data-confirm") || pending.label + "?";
    if (!dialog || typeof dialog.showModal !== "function") {
      // confirm() is no script of the page's markup: the CSP allows it.
      if (window.confirm(question)) {
        send(pending, "");
      }
      return;
    }
    dialog.querySelector(".question").textContent = question;
    const field = dialog.querySelector("label.reason");
    const input = field.querySelector("input");
    field.hidden = !pending.reason;
    input.value = "";
    dialog.querySelector(".confirm-ok").textContent = pending.label;
    dialog.showModal();
    (pending.reason ? input : dialog.querySelector(".confirm-ok")).focus();
  }

  async function send(p, reason) {
    const body = {};
    if (p.reason && reason) {
      body.reason = reason;
    }
    if (p.revision) {
      body.revision = p.revision;
    }
    tell("pending", p.label + "…");
    let resp;
    try {
      // JSON from this origin: what the API's rule against cross-site
      // writes asks of browsers, whose credentials go along.
      resp = await fetch(p.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", Accept: "application/json" },
        body: JSON.stringify(body),
      });
    } catch (e) {
      tell("error", p.label + " failed: the agent cannot be reached.");
      return;
    }
    let answer = null;
    try {
      answer = await resp.json();
    } catch (e) {
      answer = null;
    }
    if (!resp.ok) {
      let why = answer && answer.error ? answer.error : resp.status + " " + resp.statusText;
      if (answer && Array.isArray(answer.details)) {
        const more = answer.details.map((d) => d && d.message).filter((m) => m && m !== why);
        if (more.length > 0) {
          why += " (" + more.join("; ") + ")";
        }
      }
      tell("error", p.label + " failed: " + why);
      return;
    }
    tell("ok", p.done);
    // Show the new state now rather than at the next event.
    schedule();
  }

  if (dialog) {
    const form = dialog.querySelector("form");
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const p = pending;
      const reason = form.querySelector("input[name=reason]").value.trim();
      pending = null;
      dialog.close();
      if (p) {
        send(p, reason);
      }
    });
    dialog.querySelector("button[value=cancel]").addEventListener("click", () => {
      pending = null;
      dialog.close();
    });
  }

  // Delegated, so that buttons swapped in later work too.
  main.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-url]");
    if (button && main.contains(button)) {
      ev.preventDefault();
      ask(button);
    }
  });

  reveal(document);
  if (main.getAttribute("data-events")) {
    setState("connecting", "connecting…");
    connect();
  }
})();
