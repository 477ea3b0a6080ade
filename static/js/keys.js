// Keyboard navigation of lists: j / k move through the rows of a table marked
// data-keynav, Enter opens the row's first link. Typing in a field is left alone.
(function () {
  "use strict";
  var current = -1;

  document.addEventListener("keydown", function (event) {
    if (event.metaKey || event.ctrlKey || event.altKey) return;
    if (event.target.closest("input, select, textarea, [contenteditable]")) return;
    var table = document.querySelector("table[data-keynav]");
    if (!table) return;
    var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr"));
    if (!rows.length) return;
    if (event.key === "j" || event.key === "k") {
      current = Math.max(0, Math.min(rows.length - 1, current + (event.key === "j" ? 1 : -1)));
      rows.forEach(function (row, i) { row.classList.toggle("keyed", i === current); });
      rows[current].scrollIntoView({ block: "nearest" });
      event.preventDefault();
    } else if (event.key === "Enter" && current >= 0 && rows[current]) {
      var link = rows[current].querySelector("a[href]");
      if (link) { event.preventDefault(); link.click(); }
    }
  });

  // htmx swaps the table on a filter change: start again from the top.
  document.addEventListener("htmx:afterSwap", function () { current = -1; });
})();
