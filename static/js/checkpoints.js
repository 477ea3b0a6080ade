// Checkpoint timeline: submit the namespace filter on change, and keep the
// selected row marked when htmx swaps in another checkpoint.
(function () {
  "use strict";

  document.addEventListener("change", function (event) {
    var select = event.target;
    if (select.matches && select.matches("select[data-autosubmit]") && select.form) {
      select.form.submit();
    }
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    var link = event.detail && event.detail.elt;
    if (!event.detail.successful || !link || !link.classList || !link.classList.contains("cp-select")) {
      return;
    }
    document.querySelectorAll(".cp-row.current").forEach(function (row) {
      row.classList.remove("current");
    });
    document.querySelectorAll(".cp-select[aria-current]").forEach(function (other) {
      other.removeAttribute("aria-current");
    });
    link.setAttribute("aria-current", "true");
    var row = link.closest(".cp-row");
    if (row) {
      row.classList.add("current");
    }
  });
})();
