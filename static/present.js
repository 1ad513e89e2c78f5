// Presenter mode (?present=1, body.present): step through the kill list one mutant at a time with
// the buttons or the ←/→ keys, announcing each; keep the "Presenter mode" link on the scenario the
// page shows after every live update. Without this script the stepper stays hidden and the whole
// kill list is shown. No inline scripts anywhere (CSP: script-src 'self').
(function () {
  "use strict";

  var current = 0; // the mutant shown; kept across live updates, which re-render the stepper

  function presenting() {
    return document.body.classList.contains("present");
  }

  function stepper() {
    return document.querySelector("[data-stepper]");
  }

  function cards(root) {
    return root.querySelectorAll("[data-step-card]");
  }

  // Show mutant i (clamped to the list), optionally announcing it.
  function show(i, announce) {
    var root = stepper();
    if (!root) return;
    var all = cards(root);
    if (!all.length) return;
    current = Math.max(0, Math.min(i, all.length - 1));
    all.forEach(function (card, n) { card.hidden = n !== current; });
    root.querySelectorAll("button[data-step]").forEach(function (button) {
      var step = Number(button.getAttribute("data-step"));
      var end = step < 0 ? current === 0 : current === all.length - 1;
      // aria-disabled, not disabled: a disabled button would drop the keyboard focus
      if (end) button.setAttribute("aria-disabled", "true"); else button.removeAttribute("aria-disabled");
    });
    var status = root.querySelector("[data-step-status]");
    if (announce && status) status.textContent = all[current].getAttribute("data-announce") || "";
  }

  function step(delta) {
    show(current + delta, true);
  }

  // The stepper replaces the list it steps (the section gets .stepping); without JS it stays hidden.
  function setUp() {
    var root = stepper();
    if (!root || !presenting()) return;
    root.hidden = false;
    var section = root.closest("section");
    if (section) section.classList.add("stepping");
    show(current, false);
  }

  // The mode's toggle links to the same scenario as the address bar, in the other mode.
  function syncToggle() {
    var toggle = document.getElementById("present-toggle");
    if (!toggle) return;
    var url = new URL(window.location.href);
    if (presenting()) url.searchParams.delete("present"); else url.searchParams.set("present", "1");
    toggle.setAttribute("href", url.pathname + url.search);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-stepper] button[data-step]");
    if (!button) return;
    if (button.getAttribute("aria-disabled") !== "true") step(Number(button.getAttribute("data-step")));
  });

  // ←/→ step, unless the focus is somewhere that uses the arrow keys itself (a field, a scrolled table).
  document.addEventListener("keydown", function (event) {
    if (!presenting() || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (event.key !== "ArrowLeft" && event.key !== "ArrowRight") return;
    var target = event.target;
    if (target.closest && target.closest("input, select, textarea, [contenteditable], .scroll")) return;
    if (!stepper()) return;
    event.preventDefault();
    step(event.key === "ArrowRight" ? 1 : -1);
  });

  document.addEventListener("htmx:afterSettle", function () { setUp(); syncToggle(); });
  document.addEventListener("htmx:pushedIntoHistory", syncToggle);
  document.addEventListener("htmx:replacedInHistory", syncToggle);
  // A restored history entry carries its own mode in its address.
  document.addEventListener("htmx:historyRestore", function () {
    var on = new URL(window.location.href).searchParams.get("present") === "1";
    document.body.classList.toggle("present", on);
    setUp();
    syncToggle();
  });

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setUp);
  } else {
    setUp();
  }
})();
