// Web chat: send with fetch (CSRF header), receive over server-sent events. No framework, no inline script.
(function () {
  "use strict";
  const csrf = document.querySelector("meta[name=csrf]").content;
  const log = document.getElementById("chat-log");
  const statusLine = document.getElementById("chat-status");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-text");
  const files = document.getElementById("chat-files");
  const PREVIEW_BYTES = 10 * 1024 * 1024;  // a larger photo is named, not previewed
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

  // What the owner sent with files: each file's name, and a small preview of a photo read from
  // the local file (a data: URL, which the page's CSP allows), then the caption.
  function addUpload(text, chosen) {
    const div = add("you", "");
    chosen.forEach(function (file) {
      const row = document.createElement("div");
      row.className = "attachment";
      if (file.type.indexOf("image/") === 0 && file.size <= PREVIEW_BYTES) {
        const img = document.createElement("img");
        img.alt = file.name;
        const reader = new FileReader();
        reader.onload = function () { img.src = reader.result; };
        reader.readAsDataURL(file);
        row.appendChild(img);
      }
      const name = document.createElement("span");
      name.textContent = file.name;
      row.appendChild(name);
      div.appendChild(row);
    });
    if (text) {
      const caption = document.createElement("div");
      caption.textContent = text;
      div.appendChild(caption);
    }
    log.scrollTop = log.scrollHeight;
    return div;
  }

  async function post(url, body) {
    const form = body instanceof FormData;  // multipart: the browser sets the type and its boundary
    const headers = {"X-CSRF-Token": csrf};
    if (!form) { headers["Content-Type"] = "application/json"; }
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin", headers: headers,
      body: form ? body : JSON.stringify(body),
    });
    let answer = {};
    try { answer = await response.json(); } catch (e) { answer = {}; }
    if (!response.ok) { add("notice", answer.error || ("error " + response.status)); }
    return answer;
  }

  function confirmation(event) {
    if (Array.from(log.querySelectorAll(".msg.confirmation")).some(function (b) { return b.dataset.id === event.id; })) {
      return;  // already shown (rebuilt from the pending list, and sent again)
    }
    const box = document.createElement("div");
    box.className = "msg confirmation";
    box.dataset.id = event.id;
    const text = document.createElement("p");
    text.textContent = event.summary + (event.preview ? "\n" + event.preview : "");
    box.appendChild(text);
    if (event.expires_shown) {
      const expires = document.createElement("p");
      expires.className = "expires";
      expires.textContent = "Expires at " + event.expires_shown + ".";
      box.appendChild(expires);
    }
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

  // The requests still waiting for a decision, after a reload or in another tab: their cards again.
  fetch("/api/chat/pending", {credentials: "same-origin"}).then(function (response) {
    return response.ok ? response.json() : {items: []};
  }).then(function (answer) { (answer.items || []).forEach(confirmation); }).catch(function () {
    say("The requests waiting for your decision could not be loaded; reload the page.");
  });

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
    const chosen = Array.from(files.files);
    if (!text && !chosen.length) { return; }
    input.value = "";
    if (!chosen.length) {
      add("you", text);
      await post("/api/chat/messages", {text: text});
      return;
    }
    const body = new FormData();
    body.append("text", text);
    chosen.forEach(function (file) { body.append("files", file, file.name); });
    files.value = "";
    addUpload(text, chosen);
    const sending = "Sending " + chosen.length + (chosen.length === 1 ? " file…" : " files…");
    say(sending);
    await post("/api/chat/messages", body);
    if (statusLine.textContent === sending) { say(""); }
  });
})();
