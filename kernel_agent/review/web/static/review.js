// The review page's only script (served by the review server; the CSP allows no other).
// It never turns text into markup: every string it writes goes through textContent.
"use strict";

(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').getAttribute("content");
  const items = Array.from(document.querySelectorAll("#queue li.item"));
  const status = document.getElementById("status");
  const FILTERS = ["all", "awaiting", "flagged", "approved", "rejected"];
  let filter = "all";
  let current = null;

  function section(item) {
    return document.getElementById("c" + item.dataset.id);
  }

  function matches(item) {
    if (filter === "all") return true;
    if (filter === "flagged") return item.dataset.status === "flagged";
    return item.dataset.state === filter;
  }

  function visible() {
    return items.filter((item) => !item.hidden);
  }

  function select(item) {
    if (current) {
      current.classList.remove("current");
      section(current).classList.remove("current");
    }
    current = item;
    if (!item) return;
    item.classList.add("current");
    section(item).classList.add("current");
    item.scrollIntoView({ block: "nearest" });
  }

  function move(step) {
    const shown = visible();
    if (shown.length === 0) return select(null);
    const at = shown.indexOf(current);
    const next = at < 0 ? 0 : Math.min(shown.length - 1, Math.max(0, at + step));
    select(shown[next]);
  }

  function applyFilter(name) {
    filter = name;
    for (const button of document.querySelectorAll(".filters button")) {
      button.classList.toggle("on", button.dataset.filter === name);
    }
    for (const item of items) item.hidden = !matches(item);
    if (!current || current.hidden) move(0);
  }

  function say(text) {
    status.textContent = text;
  }

  async function decide(decision) {
    if (!current) return;
    const item = current;
    const box = section(item).querySelector("textarea.note");
    const id = Number(item.dataset.id);
    let answer;
    try {
      answer = await fetch("decide", {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify({ candidate: id, decision: decision, note: box.value }),
      });
    } catch (error) {
      return say("candidate " + id + ": not recorded (" + error + ")");
    }
    if (!answer.ok) {
      return say("candidate " + id + ": not recorded (" + (await answer.text()).trim() + ")");
    }
    const saved = await answer.json();
    const state = saved.decision === "approve" ? "approved" : "rejected";
    item.dataset.state = state;
    for (const label of [item.querySelector(".state"), section(item).querySelector("h2 .state")]) {
      label.textContent = state;
    }
    const stored = saved.decision + " by " + saved.reviewer + " at " + saved.at + (saved.note ? ": " + saved.note : "");
    section(item).querySelector("dd.decision").textContent = stored;
    box.value = "";
    say("candidate " + saved.candidate + ": " + state + " by " + saved.reviewer);
    item.hidden = !matches(item);
    move(1);
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const typing = event.target instanceof HTMLTextAreaElement;
    if (typing) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    const actions = {
      j: () => move(1),
      ArrowDown: () => move(1),
      k: () => move(-1),
      ArrowUp: () => move(-1),
      a: () => decide("approve"),
      r: () => decide("reject"),
      n: () => current && section(current).querySelector("textarea.note").focus(),
      u: () => document.body.classList.toggle("unified"),
      f: () => applyFilter(FILTERS[(FILTERS.indexOf(filter) + 1) % FILTERS.length]),
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });

  for (const item of items) {
    item.querySelector("a").addEventListener("click", (event) => {
      event.preventDefault();
      select(item);
    });
  }
  for (const button of document.querySelectorAll(".filters button")) {
    button.addEventListener("click", () => applyFilter(button.dataset.filter));
  }
  for (const button of document.querySelectorAll(".decide button")) {
    button.addEventListener("click", () => {
      select(items.find((item) => section(item).contains(button)));
      decide(button.dataset.decision);
    });
  }
  move(0);
  document.body.classList.add("ready");
})();
