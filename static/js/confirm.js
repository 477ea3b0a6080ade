// Confirmations in a dialog of the page instead of the browser's native confirm():
// forms with data-confirm="question" and every htmx hx-confirm. The question may carry
// counts the server put in it (from the preview services).
(function () {
  "use strict";
  var dialog;

  function ask(question) {
    if (!dialog) {
      dialog = document.createElement("dialog");
      dialog.className = "confirm-dialog";
      dialog.innerHTML = '<form method="dialog"><p class="question"></p><div class="actions">' +
        '<button value="cancel" type="submit">Cancel</button> <button value="ok" type="submit" class="danger">Confirm</button></div></form>';
      document.body.appendChild(dialog);
    }
    dialog.querySelector(".question").textContent = question;
    return new Promise(function (resolve) {
      dialog.addEventListener("close", function once() {
        dialog.removeEventListener("close", once);
        resolve(dialog.returnValue === "ok");
      });
      dialog.returnValue = "";
      dialog.showModal();
      dialog.querySelector("button[value=cancel]").focus();
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("form[data-confirm]") || form.dataset.confirmed === "1") return;
    event.preventDefault();
    ask(form.getAttribute("data-confirm")).then(function (ok) {
      if (!ok) return;
      form.dataset.confirmed = "1";
      if (form.requestSubmit) form.requestSubmit(); else form.submit();
    });
  }, true);

  document.addEventListener("htmx:confirm", function (event) {
    if (!event.detail.question) return;
    event.preventDefault();
    ask(event.detail.question).then(function (ok) { if (ok) event.detail.issueRequest(true); });
  });
})();
