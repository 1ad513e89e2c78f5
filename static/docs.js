// Interactive API docs from the installed swagger-ui-dist package (no CDN).
window.addEventListener("DOMContentLoaded", function () {
  "use strict";
  var root = document.getElementById("swagger-ui");
  window.SwaggerUIBundle({ url: root.getAttribute("data-openapi"), dom_id: "#swagger-ui" });
});
