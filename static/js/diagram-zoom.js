/* Zoom and pan for a drawn diagram: window.diagramZoom(holder) turns the element holding
   an <svg> into a viewport of its own, with buttons (zoom in, zoom out, fit, actual size),
   dragging to move, Ctrl (or ⌘) + wheel to zoom where the pointer is, and the keys
   + − 0 and the arrows when the viewport has the focus.

   Only the SVG's viewBox changes, so the drawing stays sharp at every scale; the current
   scale is kept in data-scale. No inline script or style: the page loads this file. */
(function () {
  "use strict";

  var MIN_SCALE = 0.02;
  var MAX_SCALE = 8;
  var STEP = 1.25;

  function clamp(scale) { return Math.min(MAX_SCALE, Math.max(MIN_SCALE, scale)); }

  function button(text, title, action) {
    var b = document.createElement("button");
    b.type = "button";
    b.className = "diagram-tool";
    b.textContent = text;
    b.title = title;
    b.setAttribute("aria-label", title);
    b.addEventListener("click", action);
    return b;
  }

  function setup(holder) {
    var svg = holder && holder.querySelector("svg");
    if (!svg || holder.hasAttribute("data-zoom")) { return; }
    var box = (svg.getAttribute("viewBox") || "").trim().split(/[\s,]+/).map(Number);
    if (box.length !== 4 || box.some(isNaN) || box[2] <= 0 || box[3] <= 0) { return; }
    var full = { x: box[0], y: box[1], w: box[2], h: box[3] };
    var view = { scale: 1, x: full.x, y: full.y }; // scale: screen pixels per diagram unit

    holder.setAttribute("data-zoom", "on");
    holder.classList.add("zoomable");
    holder.tabIndex = 0;
    holder.setAttribute("role", "img");
    holder.setAttribute("aria-label", "Diagram: drag to move, Ctrl and the wheel or the buttons to zoom");
    svg.removeAttribute("style"); // Mermaid's max-width would shrink the drawing back
    svg.setAttribute("width", "100%");
    svg.setAttribute("height", "100%");
    holder.style.height = Math.round(Math.max(220, Math.min(full.h + 24, window.innerHeight * 0.7))) + "px";

    var level = document.createElement("span");
    level.className = "zoom-level";
    var tools = document.createElement("div");
    tools.className = "diagram-tools";
    tools.appendChild(button("+", "Zoom in", function () { zoomBy(STEP); }));
    tools.appendChild(button("−", "Zoom out", function () { zoomBy(1 / STEP); }));
    tools.appendChild(button("Fit", "Fit the whole diagram", fit));
    tools.appendChild(button("1:1", "Actual size", start));
    tools.appendChild(level);
    holder.parentNode.insertBefore(tools, holder);

    function size() { return { w: holder.clientWidth || 1, h: holder.clientHeight || 1 }; }

    function apply() {
      var s = size();
      svg.setAttribute("viewBox", [view.x, view.y, s.w / view.scale, s.h / view.scale].join(" "));
      svg.setAttribute("data-scale", view.scale.toFixed(4));
      level.textContent = Math.round(view.scale * 100) + "%";
    }

    // Zoom keeping the diagram point under (px, py) — viewport pixels — where it is.
    function zoomBy(factor, px, py) {
      var s = size();
      if (px === undefined) { px = s.w / 2; py = s.h / 2; }
      var next = clamp(view.scale * factor);
      var ux = view.x + px / view.scale;
      var uy = view.y + py / view.scale;
      view.scale = next;
      view.x = ux - px / next;
      view.y = uy - py / next;
      apply();
    }

    function fit() {
      var s = size();
      view.scale = clamp(Math.min(s.w / full.w, s.h / full.h));
      view.x = full.x - (s.w / view.scale - full.w) / 2;
      view.y = full.y - (s.h / view.scale - full.h) / 2;
      apply();
    }

    // Actual size, or the width of the viewport when the diagram is wider: labels stay
    // readable however many nodes the diagram has; the top comes first.
    function start() {
      var s = size();
      view.scale = clamp(Math.min(1, s.w / full.w));
      view.x = full.x - Math.max(0, (s.w / view.scale - full.w) / 2);
      view.y = full.y;
      apply();
    }

    function panBy(dx, dy) {
      view.x -= dx / view.scale;
      view.y -= dy / view.scale;
      apply();
    }

    var drag = null;
    holder.addEventListener("pointerdown", function (event) {
      if (event.button !== 0) { return; }
      drag = { x: event.clientX, y: event.clientY, id: event.pointerId };
      holder.setPointerCapture(event.pointerId);
      holder.classList.add("dragging");
    });
    holder.addEventListener("pointermove", function (event) {
      if (!drag || event.pointerId !== drag.id) { return; }
      panBy(event.clientX - drag.x, event.clientY - drag.y);
      drag.x = event.clientX;
      drag.y = event.clientY;
    });
    function stop(event) {
      if (!drag || event.pointerId !== drag.id) { return; }
      drag = null;
      holder.classList.remove("dragging");
    }
    holder.addEventListener("pointerup", stop);
    holder.addEventListener("pointercancel", stop);

    holder.addEventListener("wheel", function (event) {
      if (!event.ctrlKey && !event.metaKey) { return; } // the plain wheel scrolls the page
      event.preventDefault();
      var rect = holder.getBoundingClientRect();
      zoomBy(event.deltaY < 0 ? STEP : 1 / STEP, event.clientX - rect.left, event.clientY - rect.top);
    }, { passive: false });

    holder.addEventListener("keydown", function (event) {
      var moves = { ArrowLeft: [60, 0], ArrowRight: [-60, 0], ArrowUp: [0, 60], ArrowDown: [0, -60] };
      if (event.key === "+" || event.key === "=") { zoomBy(STEP); }
      else if (event.key === "-" || event.key === "_") { zoomBy(1 / STEP); }
      else if (event.key === "0") { fit(); }
      else if (moves[event.key]) { panBy(moves[event.key][0], moves[event.key][1]); }
      else { return; }
      event.preventDefault();
    });

    window.addEventListener("resize", apply);
    start();
  }

  window.diagramZoom = setup;
})();
