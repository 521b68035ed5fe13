// The overview: the panels follow the daemon without a reload (server-sent events carry them
// rendered), and the charts are drawn again when something changed.
(function () {
  "use strict";
  const panels = document.getElementById("overview");
  const url = panels && panels.dataset.live;
  if (!url) { return; }
  let updates = 0;
  const events = new EventSource(url);
  events.onmessage = function (message) {
    const found = JSON.parse(message.data);
    updates += 1;
    panels.innerHTML = found.html;
    panels.dataset.updates = String(updates);
    if (window.bruceCharts) { window.bruceCharts.drawAll(); }
  };
})();
