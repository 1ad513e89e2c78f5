// zero3-lab's own small script: copy-link, preset auto-load, config files read into the paste form,
// and keeping aria-invalid in step with the inline errors that htmx swaps in. No inline scripts
// anywhere (CSP: script-src 'self').
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) return;
    var link = document.querySelector(button.getAttribute("data-copy"));
    var status = button.parentElement.querySelector(".copied");
    var url = link ? link.href : window.location.href;
    var done = function (text) { if (status) status.textContent = text; };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(url).then(function () { done("Link copied."); },
        function () { done("Copy failed: the link is " + url); });
    } else {
      done("Copy this link: " + url);
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
})();

