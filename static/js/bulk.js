// Thread list: tick every row of the page at once, and say what the bulk action will cover.
// Delegated on document, because htmx swaps the table when the filter changes.
(function () {
  "use strict";

  function update(form) {
    var label = form.querySelector("[data-bulk-count]");
    if (!label) return;
    var all = form.querySelector("[data-bulk-all-matching]");
    var ticked = form.querySelectorAll("input[name=ids]:checked").length;
    form.querySelectorAll("input[name=ids], [data-bulk-page]").forEach(function (box) {
      box.disabled = all.checked;
    });
    label.textContent = all.checked ? "every thread matching the filter" : ticked ? ticked + " selected" : "";
  }

  document.addEventListener("change", function (event) {
    var form = event.target.closest("#bulk-form");
    if (!form) return;
    if (event.target.matches("[data-bulk-page]")) {
      form.querySelectorAll("input[name=ids]").forEach(function (box) {
        box.checked = event.target.checked;
      });
    }
    update(form);
  });
})();
