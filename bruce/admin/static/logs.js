// The tool logs page: new executions appear at the top as they are recorded (server-sent events).
(function () {
  "use strict";
  const table = document.getElementById("executions");
  const url = table && table.dataset.live;
  if (!url) { return; }
  const body = table.querySelector("tbody");
  function cell(text) { const td = document.createElement("td"); td.textContent = text; return td; }
  const events = new EventSource(url);
  events.onmessage = function (message) {
    const item = JSON.parse(message.data);
    const empty = body.querySelector("td[colspan]");
    if (empty) { empty.parentElement.remove(); }
    const row = document.createElement("tr");
    row.className = "status-" + item.status + " live";
    const when = document.createElement("td");
    const link = document.createElement("a");
    link.href = "/logs/" + item.id;
    const time = document.createElement("time");  // as the server renders it: local, the zone named; UTC on hover
    time.dateTime = item.started_utc;
    time.title = item.started_utc + " (UTC)";
    time.textContent = item.started_local;
    link.appendChild(time);
    when.appendChild(link);
    row.appendChild(when);
    [item.tool_name, item.status, item.risk || "-", item.source, item.conversation_id || "-",
     Number(item.latency_ms).toFixed(1)].forEach(function (text) { row.appendChild(cell(text)); });
    body.insertBefore(row, body.firstChild);
  };
})();
