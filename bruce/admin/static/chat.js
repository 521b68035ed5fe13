// Web chat: send with fetch (CSRF header), receive over server-sent events. No framework, no inline script.
(function () {
  "use strict";
  const csrf = document.querySelector("meta[name=csrf]").content;
  const log = document.getElementById("chat-log");
  const statusLine = document.getElementById("chat-status");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-text");
  let draft = null;

  function add(kind, text) {
    const div = document.createElement("div");
    div.className = "msg " + kind;
    div.textContent = text;
    log.appendChild(div);
    log.scrollTop = log.scrollHeight;
    return div;
  }

  function say(text) { statusLine.textContent = text; }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body),
    });
    let answer = {};
    try { answer = await response.json(); } catch (e) { answer = {}; }
    if (!response.ok) { add("notice", answer.error || ("error " + response.status)); }
    return answer;
  }

  function confirmation(event) {
    const box = document.createElement("div");
    box.className = "msg confirmation";
    box.dataset.id = event.id;
    const text = document.createElement("p");
    text.textContent = event.summary + (event.preview ? "\n" + event.preview : "");
    box.appendChild(text);
    if (event.step_up) {
      const note = document.createElement("p");
      note.textContent = "Only the owner can approve this, on the machine: bruce approve " + event.id;
      box.appendChild(note);
    } else {
      ["Approve", "Deny"].forEach(function (label) {
        const button = document.createElement("button");
        button.type = "button";
        button.textContent = label;
        button.addEventListener("click", async function () {
          box.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
          const report = await post("/api/chat/decide", {id: event.id, approve: label === "Approve"});
          if (report.text) { add("notice", report.text); }
        });
        box.appendChild(button);
      });
    }
    log.appendChild(box);
    log.scrollTop = log.scrollHeight;
  }

  const events = new EventSource("/api/chat/events");
  events.onmessage = function (message) {
    const event = JSON.parse(message.data);
    switch (event.type) {
      case "thinking":
        if (draft) { draft.remove(); draft = null; }
        say("Bruce is thinking…");
        break;
      case "tool_started": say((event.activity || event.tool) + "…"); break;
      case "tool_finished": say(event.tool + ": " + event.status); break;
      case "delta":
        if (!draft) { draft = add("bruce draft", ""); }
        draft.textContent += event.text;
        log.scrollTop = log.scrollHeight;
        break;
      case "text":
        if (draft) { draft.remove(); draft = null; }
        add("bruce", event.text);
        say("");
        break;
      case "confirmation": confirmation(event); break;
      case "file": add("notice", "File: " + event.name + (event.caption ? " (" + event.caption + ")" : "")); break;
    }
  };
  events.onerror = function () { say("Reconnecting…"); };
  events.onopen = function () { say(""); };

  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    const text = input.value.trim();
    if (!text) { return; }
    input.value = "";
    add("you", text);
    await post("/api/chat/messages", {text: text});
  });
})();
