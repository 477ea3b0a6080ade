// Thread list: the filter form follows the address bar. htmx restores the table from its
// history snapshot on Back and Forward; the form's fields are then set from the URL, which
// holds the filter, so what the form says is what the table shows.
(function () {
  "use strict";

  function fill(form) {
    var params = new URLSearchParams(window.location.search);
    form.querySelectorAll("input[name], select[name]").forEach(function (field) {
      if (field.name === "meta") return;
      var value = params.get(field.name);
      if (field.tagName === "SELECT") {
        field.value = value !== null && field.querySelector('option[value="' + CSS.escape(value) + '"]') ? value : field.options[0].value;
      } else {
        field.value = value || "";
      }
    });
    var metas = form.querySelectorAll("input[name=meta]");
    if (!metas.length) return;
    var template = metas[metas.length - 1];
    var values = params.getAll("meta").filter(function (pair) { return pair.trim(); });
    metas.forEach(function (input, i) { if (i < metas.length - 1) input.remove(); });
    values.forEach(function (pair) {
      var input = template.cloneNode();
      input.value = pair;
      input.removeAttribute("placeholder");
      template.parentNode.insertBefore(input, template);
    });
    template.value = "";
  }

  document.addEventListener("htmx:historyRestore", function () {
    document.querySelectorAll("form[data-filter-form]").forEach(fill);
  });
})();
