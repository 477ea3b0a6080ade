/* Graph pages: draw every <pre class="mermaid"> with the vendored Mermaid, on load and
   after each htmx swap, and link the error list to the adjacency tables.

   The diagram text comes from the server, escaped in the page; Mermaid reads it back with
   textContent and renders with securityLevel "strict" (labels sanitised, no click handlers).
   Each drawn node gets its full id as a tooltip (an SVG <title>, set as text) from the
   pre's data-labels, since long labels are drawn wrapped and cut; then the drawing gets
   zoom and pan (diagram-zoom.js). */
(function () {
  "use strict";

  var counter = 0;
  var queue = Promise.resolve();
  var ready = false;

  function start() {
    if (ready) { return true; }
    if (!window.mermaid) { return false; }
    // maxEdges: Mermaid's own default (500) is below what the server lets a page draw.
    window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral", maxEdges: 5000 });
    ready = true;
    return true;
  }

  function labelsOf(pre) {
    try {
      var labels = JSON.parse(pre.getAttribute("data-labels") || "{}");
      return labels && typeof labels === "object" ? labels : {};
    } catch (error) {
      return {};
    }
  }

  // Mermaid marks each node group with data-id (n3), or names it "<diagram>-flowchart-n3-<k>".
  function addTitles(svg, labels) {
    if (!svg) { return; }
    svg.querySelectorAll("g.node").forEach(function (group) {
      var id = group.getAttribute("data-id");
      if (!id) {
        var match = /-(n\d+)-\d+$/.exec(group.id || "");
        id = match && match[1];
      }
      if (!id || !Object.prototype.hasOwnProperty.call(labels, id)) { return; }
      var title = document.createElementNS("http://www.w3.org/2000/svg", "title");
      title.textContent = String(labels[id]);
      group.insertBefore(title, group.firstChild);
    });
  }

  function drawOne(pre) {
    var source = pre.textContent;
    var labels = labelsOf(pre);
    var id = "graph-diagram-" + (++counter);
    pre.setAttribute("data-processed", "pending");
    return window.mermaid.render(id, source).then(function (out) {
      var figure = document.createElement("div");
      figure.className = "mermaid-svg";
      figure.innerHTML = out.svg;
      pre.hidden = true;
      pre.setAttribute("data-processed", "true");
      pre.insertAdjacentElement("afterend", figure);
      addTitles(figure.querySelector("svg"), labels);
      if (window.diagramZoom) { window.diagramZoom(figure); }
    }).catch(function (error) {
      // Mermaid may leave its scratch element behind when it fails.
      var scratch = document.getElementById("d" + id);
      if (scratch) { scratch.remove(); }
      pre.setAttribute("data-processed", "error");
      var note = document.createElement("p");
      note.className = "diagram-error";
      note.textContent = "The diagram could not be drawn: " + ((error && error.message) || String(error));
      pre.insertAdjacentElement("afterend", note);
    });
  }

  // Diagrams are drawn one after another: Mermaid keeps state while it lays one out.
  function drawAll(root) {
    if (!start()) { return; }
    var scope = root && root.querySelectorAll ? root : document;
    var pending = Array.prototype.slice.call(scope.querySelectorAll("pre.mermaid:not([data-processed])"));
    if (scope.matches && scope.matches("pre.mermaid:not([data-processed])")) { pending.unshift(scope); }
    pending.forEach(function (pre) {
      queue = queue.then(function () { return pre.isConnected ? drawOne(pre) : null; });
    });
  }

  function highlight(node, on) {
    if (!node) { return; }
    var selector = '[data-node="' + CSS.escape(node) + '"]';
    document.querySelectorAll(".adjacency " + selector).forEach(function (row) {
      row.classList.toggle("highlighted", on);
    });
  }

  document.addEventListener("DOMContentLoaded", function () { drawAll(document); });
  document.addEventListener("htmx:afterSettle", function (event) { drawAll(event.target); });

  // Pointing at an error highlights its node in the adjacency tables.
  ["mouseover", "focusin"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var item = event.target.closest && event.target.closest(".graph-errors [data-node]");
      if (item) { highlight(item.getAttribute("data-node"), true); }
    });
  });
  ["mouseout", "focusout"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var item = event.target.closest && event.target.closest(".graph-errors [data-node]");
      if (item) { highlight(item.getAttribute("data-node"), false); }
    });
  });
})();
