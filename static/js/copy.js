// Copy buttons: <button data-copy="#id"> copies the text of that element,
// <button data-copy-text="…"> the text it carries.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy], [data-copy-text]");
    if (!button) return;
    var source = button.hasAttribute("data-copy") ? document.querySelector(button.getAttribute("data-copy")) : null;
    if (!source && !button.hasAttribute("data-copy-text")) return;
    var text = source ? source.textContent.trim() : button.getAttribute("data-copy-text");
    var done = function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy"; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { if (source) select(source); });
    } else if (source) {
      select(source);
      try { document.execCommand("copy"); done(); } catch (e) { /* the text stays selected for a manual copy */ }
    }
  });
  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
})();
