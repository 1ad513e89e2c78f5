// zero3-lab's own small script: copy-link, the preset menu's keyboard, config files read into the
// paste form, the history entries of live updates, which deferred parts are on screen, open <details>
// and exact-bytes switches kept across updates, failed updates said in place, and keeping aria-invalid
// in step with the inline errors that htmx swaps in. No inline scripts anywhere (CSP: script-src 'self').
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    var status = button.parentElement.querySelector(".copied");
    var done = function (text) { if (status) status.textContent = text; };
    // A link copies its address; anything else (a snippet's <pre>) its text.
    var isLink = !source || source.tagName === "A";
    var text = !source ? window.location.href : isLink ? source.href : source.textContent;
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(isLink ? "Link copied." : "Copied."); },
        function () { done(isLink ? "Copy failed: the link is " + text : "Copy failed: select the text and copy it."); });
    } else {
      done(isLink ? "Copy this link: " + text : "Select the text and copy it.");
    }
  });

  document.addEventListener("change", function (event) {
    var select = event.target.closest("select[data-autosubmit]");
    if (select && select.value) select.form.requestSubmit();
    // "Use a model's config.json": a picked file fills the textarea (the form posts text, no upload).
    var input = event.target.closest("input[type=file][data-fills]");
    if (!input || !input.files || !input.files[0]) return;
    var target = document.querySelector(input.getAttribute("data-fills"));
    input.files[0].text().then(function (text) { if (target) target.value = text; });
  });

  // The preset menu loads on "Load" or Enter only: arrow keys merely move through it (a closed
  // <select> fires `change` on each arrow key). "Load" with nothing picked is refused by the
  // select's `required`, so the scenario on the page is never discarded.
  document.addEventListener("keydown", function (event) {
    var select = event.target.closest && event.target.closest("select#preset");
    if (!select || event.key !== "Enter") return;
    event.preventDefault();
    if (select.value) select.form.requestSubmit();
  });

  // History: the server answers each live update with HX-Push-Url or HX-Replace-Url
  // (app/web/pages.py). The first update of a typed edit opens one entry; while the entry is the
  // edit's, every later update (each keystroke's, then the blur's or Enter's) replaces it. So
  // typing 128 leaves one entry, and back returns to the scenario before the edit.
  var typedEntry = false;
  function typed(config) {
    return !!(config && config.triggeringEvent && config.triggeringEvent.type === "input");
  }
  document.addEventListener("htmx:configRequest", function (event) {
    if (event.detail.elt.id !== "scenario") return;
    if (typedEntry) event.detail.headers["X-History"] = "replace";
    if (!typed(event.detail)) typedEntry = false; // a settled change closes the edit's entry
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var detail = event.detail;
    if (!detail.elt || detail.elt.id !== "scenario" || !detail.successful) return;
    if (typed(detail.requestConfig)) typedEntry = true;
  });
  window.addEventListener("popstate", function () { typedEntry = false; });

  // The parts a live update may defer (#lower: the sections below the peak; #kills: the kill
  // lists) come inline when they are on screen as the edit is sent, rather than as a placeholder that loads
  // them by a second request (X-In-View, app/web/pages.py). An IntersectionObserver keeps track without
  // asking for a layout; it is given the new elements after every swap.
  var DEFERRABLE = ["lower", "kills"];
  var inView = {};
  var viewWatch = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) { inView[entry.target.id] = entry.isIntersecting; });
  }) : null;
  function watchDeferrable() {
    if (!viewWatch) return;
    viewWatch.disconnect();
    inView = {};
    DEFERRABLE.forEach(function (id) {
      var element = document.getElementById(id);
      if (element) viewWatch.observe(element);
    });
  }
  watchDeferrable();
  document.addEventListener("htmx:afterSettle", watchDeferrable);
  document.addEventListener("htmx:configRequest", function (event) {
    if (event.detail.elt.id !== "scenario") return;
    var shown = DEFERRABLE.filter(function (id) { return inView[id]; });
    if (shown.length) event.detail.headers["X-In-View"] = shown.join(" ");
    // The fields whose error slot holds a message: only those and the fields with an error now come back, not
    // every field's empty slot (X-Shown-Errors, app/web/http/htmx.py)
    var filled = [];
    document.querySelectorAll("#scenario .field-error").forEach(function (slot) {
      if (slot.textContent.trim() !== "") filled.push(slot.id.slice(2));
    });
    event.detail.headers["X-Shown-Errors"] = filled.length ? filled.join(" ") : "-";
  });

  // Open <details> in the results stay open across a live update. A <details> is known by its id,
  // else by its section's heading id, its class and its place in that section. So do the switches
  // that show a table's exact bytes (.show-exact, known by their ids).
  var reopen = null;
  var switchedOn = null;
  var lowerHeight = 0; // the height of the sections below the peak before a live update
  function detailsKey(details) {
    if (details.id) return "#" + details.id;
    var scope = details.closest("section[aria-labelledby]") || details.closest("#results");
    var index = Array.prototype.indexOf.call(scope.querySelectorAll("details"), details);
    return (scope.getAttribute("aria-labelledby") || scope.id) + "|" + details.className + "|" + index;
  }
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (!target || target.id !== "results" || !event.detail.shouldSwap) return;
    reopen = [];
    target.querySelectorAll("details[open]").forEach(function (d) { reopen.push(detailsKey(d)); });
    switchedOn = [];
    target.querySelectorAll("input.show-exact:checked").forEach(function (i) { switchedOn.push(i.id); });
    var lower = target.querySelector("#lower");
    lowerHeight = lower ? lower.offsetHeight : 0;
  });
  // A live update defers the sections below the peak (#lower[data-pending]): until they arrive,
  // their placeholder keeps the height they had, so the page below does not move up and back down.
  document.addEventListener("htmx:afterSwap", function (event) {
    if (!event.detail.target || event.detail.target.id !== "results") return;
    var pending = document.querySelector("#lower[data-pending]");
    // on the placeholder's section: htmx's settle puts back #lower's own style (it has an id in both)
    var holder = pending && pending.querySelector("section");
    if (holder && lowerHeight) holder.style.minHeight = lowerHeight + "px";
  });
  document.addEventListener("htmx:afterSettle", function () {
    var results = document.getElementById("results");
    if (!reopen || !results) return;
    var keys = reopen;
    var switches = switchedOn || [];
    // A deferred section ([data-pending]: the fit finder's sections, the kill lists) reopens its own
    // <details> and turns its own switches back on when it arrives.
    var pending = results.querySelector("[data-pending]") !== null;
    reopen = pending ? keys : null;
    switchedOn = pending ? switches : null;
    switches.forEach(function (id) {
      var input = document.getElementById(id);
      if (input) input.checked = true;
    });
    results.querySelectorAll("details").forEach(function (d) {
      if (!d.open && keys.indexOf(detailsKey(d)) >= 0) d.open = true; // a lazy table loads again
    });
  });

  // A live update that fails (a server error, the network) says so in place of the results it
  // could not replace: an alert at the top of the results, which are marked out of date.
  function updateFailed(event, what) {
    if (!event.detail.elt || event.detail.elt.id !== "scenario") return;
    var results = document.getElementById("results");
    if (!results) return;
    var alert = document.getElementById("update-failed");
    if (!alert) {
      alert = document.createElement("div");
      alert.id = "update-failed";
      alert.className = "notice bad update-failed";
      alert.setAttribute("role", "alert");
      results.insertBefore(alert, results.firstChild);
    }
    alert.textContent = "The update failed (" + what + "). The results below are out of date: " +
      "they are for the inputs before your last change. ";
    var retry = document.createElement("button");
    retry.type = "button";
    retry.textContent = "Try again";
    retry.addEventListener("click", function () { document.getElementById("scenario").requestSubmit(); });
    alert.appendChild(retry);
    results.classList.add("stale");
  }
  document.addEventListener("htmx:responseError", function (event) {
    updateFailed(event, "the server answered " + event.detail.xhr.status);
  });
  document.addEventListener("htmx:sendError", function (event) {
    updateFailed(event, "the lab could not be reached");
  });

  // After each swap, mark a field invalid exactly when its error slot holds a message.
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("#scenario .field").forEach(function (field) {
      var slot = field.querySelector(".field-error");
      var input = field.querySelector("input, select");
      if (!slot || !input) return;
      var bad = slot.textContent.trim() !== "";
      field.classList.toggle("invalid", bad);
      if (bad) input.setAttribute("aria-invalid", "true"); else input.removeAttribute("aria-invalid");
    });
  });
  // The model search box (macros/fields.html): shown once this script runs; typing hides the options whose
  // text (title, count, family label) lacks any of the typed words, Enter picks the first one still shown,
  // Escape clears. Its input events stop here, in the capture phase, so they never reach the form's
  // live-update trigger: the box is not part of the scenario.
  function showSearch() {
    document.querySelectorAll("input[data-filters][hidden]").forEach(function (box) { box.hidden = false; });
  }
  function filterModels(box) {
    var select = document.querySelector(box.getAttribute("data-filters"));
    if (!select) return null;
    var words = box.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0, total = 0, first = null;
    select.querySelectorAll("optgroup").forEach(function (group) {
      var any = false;
      group.querySelectorAll("option").forEach(function (option) {
        var text = (option.textContent + " " + group.label + " " + option.value).toLowerCase();
        var match = words.every(function (w) { return text.indexOf(w) >= 0; });
        option.hidden = !match;
        total += 1;
        if (match) { shown += 1; any = true; if (!first) first = option; }
      });
      group.hidden = !any;
    });
    var count = document.getElementById(box.getAttribute("aria-describedby"));
    if (count) count.textContent = words.length ? shown + " of " + total + " models" : "";
    return first;
  }
  document.addEventListener("input", function (event) {
    var box = event.target.closest && event.target.closest("input[data-filters]");
    if (!box) return;
    event.stopPropagation();
    filterModels(box);
  }, true);
  document.addEventListener("keydown", function (event) {
    var box = event.target.closest && event.target.closest("input[data-filters]");
    if (!box) return;
    if (event.key === "Escape") { box.value = ""; filterModels(box); return; }
    if (event.key !== "Enter") return;
    event.preventDefault();  // not the form's submit: picking a model is the change that updates the page
    var first = filterModels(box);
    var select = document.querySelector(box.getAttribute("data-filters"));
    if (!first || !select || select.value === first.value) return;
    select.value = first.value;
    select.dispatchEvent(new Event("change", { bubbles: true }));
  });
  showSearch();
  document.addEventListener("htmx:afterSettle", showSearch);
})();

