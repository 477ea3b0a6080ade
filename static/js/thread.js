// Thread page: links to a block (#seq-9000) or to a tool call or result that lies outside
// the window of blocks on the page reload the page around that block, then scroll to it.
(function () {
  "use strict";

  function tab() {
    var panel = document.querySelector("[role=tabpanel]");
    return panel ? panel.getAttribute("data-tab") : "active";
  }

  function reloadAround(seq, hash) {
    var params = new URLSearchParams(window.location.search);
    params.set("tab", tab());
    params.set("around", seq);
    ["before", "after", "jump"].forEach(function (name) { params.delete(name); });
    window.location.replace(window.location.pathname + "?" + params.toString() + hash);
  }

  function landOnHash() {
    var match = /^#seq-(\d+)$/.exec(window.location.hash);
    if (!match) {
      // A jump (or an `around` link without a hash): the server marked the block it opened on.
      var landed = document.querySelector(".block.landed");
      if (landed) landed.scrollIntoView({ block: "center" });
      return;
    }
    var target = document.getElementById("seq-" + match[1]);
    if (target) {
      target.classList.add("landed");
      target.scrollIntoView({ block: "center" });
    } else if (new URLSearchParams(window.location.search).get("around") !== match[1]) {
      reloadAround(match[1], window.location.hash);
    }
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-link]");
    if (!link) return;
    var id = link.getAttribute("href").slice(1);
    var target = document.getElementById(id);
    if (target) {
      event.preventDefault();
      target.closest(".block").classList.add("landed");
      target.scrollIntoView({ block: "center" });
      history.replaceState(null, "", "#" + id);
    } else if (new URLSearchParams(window.location.search).get("around") !== link.getAttribute("data-seq")) {
      // The call or its result lies outside this window: open the window around this block.
      event.preventDefault();
      reloadAround(link.getAttribute("data-seq"), "#" + id);
    }
  });

  // Tabs: left and right arrows move between them, as in any tab list.
  document.addEventListener("keydown", function (event) {
    var current = event.target.closest("[role=tab]");
    if (!current || (event.key !== "ArrowRight" && event.key !== "ArrowLeft")) return;
    var tabs = Array.prototype.slice.call(current.parentNode.querySelectorAll("[role=tab]"));
    var next = tabs[(tabs.indexOf(current) + (event.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
    event.preventDefault();
    next.focus();
    next.click();
  });

  // The live turn: count the chunks as the stream brings them. The stream's last event
  // ("finished", or "timeout" before the server ends it) closes it here first, so the
  // end of the response is not reported as a connection error; the panel, read again,
  // opens a fresh stream when a turn is still pending.
  document.addEventListener("htmx:sseMessage", function (event) {
    var message = event.detail;
    if (message && (message.type === "timeout" || message.type === "finished")) {
      if (message.target && typeof message.target.close === "function") message.target.close();
      return;
    }
    if (!message || message.type !== "chunk") return;
    var counter = document.querySelector("#turns-panel [data-chunk-count]");
    if (counter) counter.textContent = String(Number(counter.textContent) + 1);
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", landOnHash);
  else landOnHash();
  window.addEventListener("hashchange", landOnHash);
})();
