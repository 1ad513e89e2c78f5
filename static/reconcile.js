// /reconcile: a picked file is read into the textarea (the form posts text: the lab has no multipart
// parser), and a text too large for the request's limit is refused here, inline, instead of the
// server's bare 413. Without this script the file picker stays hidden and the paste still works.
// No inline scripts anywhere (CSP: script-src 'self').
(function () {
  "use strict";

  var form = document.getElementById("reconcile-form");
  if (!form) return;
  var box = document.getElementById("observed");
  var input = document.getElementById("observed-file");
  var message = form.querySelector(".client-error");

  function refuse(text) {
    message.textContent = text;
    message.hidden = false;
    box.setAttribute("aria-invalid", "true");
  }

  function clear() {
    message.textContent = "";
    message.hidden = true;
  }

  if (input) {
    input.closest(".file-pick").hidden = false;
    input.addEventListener("change", function () {
      var file = input.files && input.files[0];
      if (!file) return;
      var max = Number(input.getAttribute("data-max-bytes"));
      if (file.size > max) {
        refuse(file.name + " is " + file.size.toLocaleString("en") + " bytes, more than the " +
          max.toLocaleString("en") + " this page takes: run zero3-lab reconcile on it, or keep fewer steps.");
        return;
      }
      file.text().then(function (text) {
        box.value = text;
        clear();
      });
    });
  }

  form.addEventListener("submit", function (event) {
    // What the browser will send, URL-encoded: the server's request limit counts these bytes.
    var size = ("observed=" + encodeURIComponent(box.value) + "&step=" + encodeURIComponent(form.step.value)).length;
    var max = Number(form.getAttribute("data-max-body"));
    if (size > max) {
      event.preventDefault();
      refuse("The records are " + size.toLocaleString("en") + " bytes once encoded, more than the " +
        max.toLocaleString("en") + " a request may carry: run zero3-lab reconcile on the file, or keep fewer steps.");
    }
  });
})();
