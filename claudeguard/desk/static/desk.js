// claudeguard desk: the page's only script (no build step, no library, nothing from another origin).
// Everything that came from an agent (commands, file contents, prompts) is put in the page as
// text (textContent), never as HTML.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="desk-csrf"]').content;
  const cards = new Map(); // request id -> its <article>
  let requests = []; // newest first, as the server sent them
  let sessions = [];
  let selected = null; // request id
  let skew = 0; // server clock minus ours, seconds
  let tab = "requests";

  function $(sel) { return document.querySelector(sel); }
  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function now() { return Date.now() / 1000 + skew; }
  function note(text, error) {
    const n = $("#note");
    n.textContent = text || "";
    n.classList.toggle("error", !!error);
  }
  function duration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
    return Math.floor(s / 3600) + " h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + " min";
  }

  async function post(path, body) {
    const res = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-Desk-CSRF": csrf },
      body: JSON.stringify(body),
    });
    let data = {};
    try { data = await res.json(); } catch (e) { data = { error: res.status + " " + res.statusText }; }
    if (res.status === 401) note("Logged out: open a new URL from `claudeguardctl desk`.", true);
    if (!res.ok) throw new Error(data.error || (res.status + " " + res.statusText));
    return data;
  }
  async function get(path) {
    const res = await fetch(path, { credentials: "same-origin" });
    if (res.status === 401) note("Logged out: open a new URL from `claudeguardctl desk`.", true);
    const data = await res.json();
    if (!res.ok) throw new Error(data.error || res.statusText);
    return data;
  }

  // -- waiting requests ----------------------------------------------------------------------

  function agentLabel(r) {
    let text = r.agent_type || "main agent";
    if (r.background) text += " · background" + (r.short_id ? " " + r.short_id : "");
    return text;
  }

  function callNode(r) {
    const box = el("div", "call");
    const c = r.call || { kind: "input", text: "" };
    if (c.kind === "bash") {
      box.appendChild(el("pre", "cmd", c.command));
      if (c.parts && c.parts.length > 1 || (c.parts && c.parts.length === 1 && c.parts[0].text !== c.command)) {
        const ol = el("ol", "parts");
        for (const p of c.parts) ol.appendChild(el("li", p.writes ? "writes" : "", p.text));
        box.appendChild(ol);
      }
      if (!c.ok) box.appendChild(el("p", "unsafe", "Cannot be read with confidence" + (c.reason ? ": " + c.reason : "") + ". Only \u201conce\u201d is offered."));
    } else if (c.kind === "diff") {
      for (const n of c.notes || []) box.appendChild(el("p", "notes", n));
      const pre = el("pre", "diff");
      for (const line of c.diff || []) {
        const ch = line.charAt(0);
        let cls = "";
        if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
        else if (ch === "+") cls = "add";
        else if (ch === "-") cls = "del";
        else if (ch === "@") cls = "hunk";
        pre.appendChild(el("span", cls, line));
      }
      box.appendChild(pre);
    } else {
      box.appendChild(el("pre", "input", c.text));
    }
    return box;
  }

  function buildCard(r) {
    const card = el("article", "req");
    card.dataset.requestId = r.id;
    card.tabIndex = -1;
    const head = el("div", "head");
    head.appendChild(el("span", "tool", r.tool));
    head.appendChild(el("span", "agent" + (r.background ? " bg" : ""), agentLabel(r)));
    head.appendChild(el("span", "machine", r.machine));
    head.appendChild(el("span", "rid muted", r.id));
    const dl = el("span", "deadline");
    dl.dataset.deadline = r.deadline;
    head.appendChild(dl);
    card.appendChild(head);

    const meta = el("div", "meta");
    const bits = [["prompt", r.prompt || "(not known)"], ["cwd", r.cwd], ["session", r.session_id],
      ["asked by", r.rule ? r.rule + (r.rule_source ? " (" + r.rule_source + ")" : "") : "no rule decided: the CLI would have asked"]];
    bits.forEach(function (b, i) {
      if (i) meta.appendChild(document.createTextNode(" · "));
      meta.appendChild(document.createTextNode(b[0] + " "));
      meta.appendChild(el("b", "", b[1]));
    });
    card.appendChild(meta);
    card.appendChild(callNode(r));

    const answers = el("div", "answers");
    const grants = (r.grant_rules || []).length > 0;
    const buttons = [["once", "Allow once", "y"], ["agent", "Allow for this agent", "a"],
      ["session", "Allow for this session", "s"], ["forever", "Allow forever", "f"]];
    if (r.kind === "dialog" && r.choices) {
      for (const choice of r.choices) {
        const b = el("button", "", choice);
        b.type = "button";
        b.dataset.choice = choice;
        answers.appendChild(b);
      }
    } else {
      for (const [word, label, key] of buttons) {
        const b = el("button", "", label + " (" + key + ")");
        b.type = "button";
        b.dataset.answer = word;
        if (word !== "once" && !grants) { b.disabled = true; b.title = "this call cannot be granted beyond once"; }
        if (word === "forever" && !r.forever) { b.disabled = true; b.title = r.forever_why || "not offered"; }
        if ((word === "agent" || word === "session") && r.grant_why) { b.disabled = true; b.title = r.grant_why; }
        answers.appendChild(b);
      }
    }
    const msg = el("input", "msg");
    msg.placeholder = "message for the model (with deny)";
    msg.maxLength = 2000;
    answers.appendChild(msg);
    const deny = el("button", "", "Deny (n)");
    deny.type = "button";
    deny.dataset.answer = "deny";
    answers.appendChild(deny);
    card.appendChild(answers);
    const forever = el("div", "forever");
    if (r.forever) forever.textContent = "forever writes " + r.forever.rules.join(", ") + " into [permissions]." + r.forever.kind + " of " + r.forever.file + " (comments kept)";
    else forever.textContent = "no forever: " + (r.forever_why || "not offered");
    card.appendChild(forever);
    card.appendChild(el("div", "result"));
    return card;
  }

  function renderRequests(data) {
    const t0 = performance.now();
    requests = data.requests || [];
    const box = $("#requests");
    const live = new Set(requests.map(function (r) { return r.id; }));
    for (const [id, node] of cards) {
      if (!live.has(id)) { node.remove(); cards.delete(id); }
    }
    requests.forEach(function (r, i) {
      let node = cards.get(r.id);
      if (!node) { node = buildCard(r); cards.set(r.id, node); }
      if (box.children[i] !== node) box.insertBefore(node, box.children[i] || null);
    });
    if (!selected || !cards.has(selected)) select(requests.length ? requests[0].id : null);
    $("#count-requests").textContent = requests.length;
    $("#empty-requests").classList.toggle("hidden", requests.length > 0);
    tick();
    // For bench/desk.py: the DOM work, then up to the next frame (style, layout, paint).
    document.body.dataset.renderMs = (performance.now() - t0).toFixed(1);
    document.body.dataset.requests = String(requests.length);
    requestAnimationFrame(function () {
      setTimeout(function () { document.body.dataset.paintedMs = (performance.now() - t0).toFixed(1); }, 0);
    });
  }

  function select(id) {
    if (selected && cards.has(selected)) cards.get(selected).classList.remove("selected");
    selected = id;
    if (id && cards.has(id)) cards.get(id).classList.add("selected");
  }

  async function answer(card, word, choice) {
    const id = card.dataset.requestId;
    const r = requests.find(function (x) { return x.id === id; }) || {};
    const msg = card.querySelector("input.msg");
    const result = card.querySelector(".result");
    const body = { id: id, answer: word, machine: r.machine };
    if (word === "deny" && msg.value.trim()) body.message = msg.value.trim();
    if (choice) { body.choice = choice; body.answer = "once"; }
    card.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    result.className = "result";
    result.textContent = "answering…";
    try {
      const data = await post("api/answer", body);
      card.classList.add("done");
      result.textContent = data.line;
    } catch (e) {
      result.className = "result error";
      result.textContent = e.message;
    }
  }

  document.addEventListener("click", function (ev) {
    const t = ev.target;
    if (!(t instanceof Element)) return;
    const tabButton = t.closest("[data-tab]");
    if (tabButton) { show(tabButton.dataset.tab); return; }
    const card = t.closest("[data-request-id]");
    if (card) {
      select(card.dataset.requestId);
      const b = t.closest("button");
      if (b && !b.disabled && (b.dataset.answer || b.dataset.choice)) answer(card, b.dataset.answer, b.dataset.choice);
      return;
    }
    const stop = t.closest("[data-stop]");
    if (stop) { stopSession(stop); return; }
    const apply = t.closest("[data-apply]");
    if (apply) applyRule(apply);
  });

  const KEYS = { y: "once", a: "agent", s: "session", f: "forever" };
  document.addEventListener("keydown", function (ev) {
    const t = ev.target;
    if (t instanceof HTMLInputElement && t.classList.contains("msg")) {
      if (ev.key === "Enter") { ev.preventDefault(); answer(t.closest("[data-request-id]"), "deny"); }
      else if (ev.key === "Escape") t.blur();
      return;
    }
    if (t instanceof HTMLInputElement || t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement) return;
    if (ev.ctrlKey || ev.metaKey || ev.altKey || tab !== "requests") return;
    const i = requests.findIndex(function (r) { return r.id === selected; });
    if (ev.key === "j" || ev.key === "k") {
      const next = requests[Math.max(0, Math.min(requests.length - 1, i + (ev.key === "j" ? 1 : -1)))];
      if (next) { select(next.id); cards.get(next.id).scrollIntoView({ block: "nearest" }); }
      return;
    }
    const card = selected && cards.get(selected);
    if (!card || card.classList.contains("done")) return;
    if (KEYS[ev.key]) {
      const b = card.querySelector('[data-answer="' + KEYS[ev.key] + '"]');
      if (b && !b.disabled) answer(card, KEYS[ev.key]);
    } else if (ev.key === "n") {
      ev.preventDefault();
      card.querySelector("input.msg").focus(); // Enter sends the deny
    }
  });

  function tick() {
    const t = now();
    for (const node of document.querySelectorAll("#requests .deadline")) {
      const left = parseFloat(node.dataset.deadline) - t;
      node.textContent = left > 0 ? duration(left) + " left" : "expired";
      node.classList.toggle("soon", left < 30);
    }
    for (const node of document.querySelectorAll("#sessions [data-idle-since]")) {
      node.textContent = duration(t - parseFloat(node.dataset.idleSince));
    }
  }
  setInterval(tick, 1000);

  // -- sessions --------------------------------------------------------------------------------

  function renderSessions(data) {
    sessions = data.sessions || [];
    const body = $("#sessions");
    body.textContent = "";
    for (const s of sessions) {
      const stalled = s.state === "stalled" || s.stalled === true;
      const tr = el("tr", stalled ? "stalled" : "");
      tr.dataset.sessionId = s.session_id || "";
      tr.dataset.state = s.state || "";
      const state = el("td");
      state.appendChild(el("span", "state" + (stalled ? " stalled" : ""), s.state || "?"));
      if (s.base_state && s.base_state !== s.state) state.appendChild(el("span", "muted", " (" + s.base_state + ")"));
      if (s.background) state.appendChild(el("div", "muted", "background " + (s.short_id || "")));
      tr.appendChild(state);
      tr.appendChild(el("td", "num", typeof s.cpu_s === "number" ? s.cpu_s.toFixed(1) + " s" : "-"));
      tr.appendChild(el("td", "num", s.tokens || 0));
      const idle = el("td", "num", "-");
      if (typeof s.last_activity_at === "number") idle.dataset.idleSince = s.last_activity_at;
      tr.appendChild(idle);
      tr.appendChild(el("td", "num", s.pending || 0));
      const where = el("td");
      where.appendChild(el("div", "", s.cwd || "-"));
      if (s.prompt) where.appendChild(el("div", "muted", s.prompt));
      tr.appendChild(where);
      tr.appendChild(el("td", "verdict", stalled ? (s.diagnosis || "stalled") : (s.detail || "")));
      const act = el("td");
      if (stalled) {
        const b = el("button", "stop", "Stop");
        b.type = "button";
        b.dataset.stop = s.session_id;
        act.appendChild(b);
      }
      tr.appendChild(act);
      body.appendChild(tr);
    }
    $("#count-sessions").textContent = sessions.length;
    $("#empty-sessions").classList.toggle("hidden", sessions.length > 0);
    tick();
  }

  async function stopSession(button) {
    if (!window.confirm("Stop this session's CLI (SIGTERM to its process tree)?")) return;
    button.disabled = true;
    try { note((await post("api/stop", { session_id: button.dataset.stop })).line); }
    catch (e) { note(e.message, true); button.disabled = false; }
  }

  // -- audit log -------------------------------------------------------------------------------

  async function loadAudit() {
    const form = new FormData($("#audit-filter"));
    const q = new URLSearchParams();
    for (const [k, v] of form) if (v) q.set(k, v);
    let data;
    try { data = await get("api/audit?" + q.toString()); } catch (e) { note(e.message, true); return; }
    const body = $("#audit");
    body.textContent = "";
    for (const row of data.rows) {
      const tr = el("tr");
      tr.appendChild(el("td", "", (row.time || "").replace("T", " ").replace("Z", "")));
      tr.appendChild(el("td", "", (row.session_id || "").slice(0, 12)));
      tr.appendChild(el("td", "", row.agent_type || (row.event ? "" : "main")));
      tr.appendChild(el("td", "", row.summary || row.tool || row.event || ""));
      tr.appendChild(el("td", "dec-" + (row.decision || ""), row.decision || row.event || ""));
      tr.appendChild(el("td", "", (row.decided_by || row.via || "") + (row.browser_session ? " " + row.browser_session : "")));
      tr.appendChild(el("td", "", row.scope || ""));
      tr.appendChild(el("td", "num", typeof row.waited_s === "number" ? row.waited_s.toFixed(1) + " s" : ""));
      tr.appendChild(el("td", "", row.rule || ""));
      body.appendChild(tr);
    }
    $("#audit-total").textContent = data.rows.length + " shown of " + data.total + " lines";
  }
  $("#audit-filter").addEventListener("submit", function (ev) { ev.preventDefault(); loadAudit(); });

  // -- suggested rules -------------------------------------------------------------------------

  function since() { return new FormData($("#suggest-filter")).get("since"); }

  async function loadSuggest() {
    let data;
    try { data = await get("api/suggestions?since=" + encodeURIComponent(since())); } catch (e) { note(e.message, true); return; }
    const box = $("#suggest");
    box.textContent = "";
    const o = data.outcomes || {};
    $("#suggest-head").textContent = data.calls + " calls asked a human (" + (o.approved || 0) + " approved, " +
      (o.denied || 0) + " denied, " + (o.timed_out || 0) + " timed out); a rule applied goes into " + data.file + ".";
    const groups = [["allow", data.allow, false], ["deny", data.deny, false], ["allow", data.broader, true]];
    for (const [kind, rows, broader] of groups) {
      for (const row of rows || []) {
        const div = el("div", "rule");
        div.dataset.rule = row.rule;
        const head = el("div");
        head.appendChild(el("b", "dec-" + kind, (broader ? "broader " : "") + kind + " "));
        head.appendChild(el("code", "", row.rule));
        head.appendChild(el("span", "muted", "  " + (row.note || (broader ? "covers " + row.covers.join(", ") : "")) + " "));
        const b = el("button", "apply", "Apply");
        b.type = "button";
        b.dataset.apply = kind;
        b.dataset.rule = row.rule;
        head.appendChild(b);
        div.appendChild(head);
        const prev = row.preview || [];
        div.appendChild(el("div", "muted", "would have decided " + prev.length + (prev.length >= 20 ? "+" : "") + " past call" + (prev.length === 1 ? "" : "s") + ":"));
        const ul = el("ul");
        for (const c of prev) ul.appendChild(el("li", "", (c.time || "").replace("T", " ").slice(0, 19) + "  " + (c.summary || c.tool) + "  (" + c.decision + " by " + c.decided_by + ", " + (c.agent_type || "main") + ")"));
        div.appendChild(ul);
        box.appendChild(div);
      }
    }
    for (const row of data.conflicts || []) box.appendChild(el("p", "muted", "not suggested, answered both ways: " + row.rule));
    for (const s of data.skipped || []) box.appendChild(el("p", "muted", "not suggested, " + s.why + ": " + s.calls + " call(s)"));
    if (!box.children.length) box.appendChild(el("p", "empty", "No rule to suggest."));
  }
  $("#suggest-filter").addEventListener("submit", function (ev) { ev.preventDefault(); loadSuggest(); });

  async function applyRule(button) {
    button.disabled = true;
    try { note((await post("api/apply", { rule: button.dataset.rule, kind: button.dataset.apply, since: since() })).line); loadSuggest(); }
    catch (e) { note(e.message, true); button.disabled = false; }
  }

  // -- tabs and the live stream ------------------------------------------------------------------

  function show(name) {
    tab = name;
    for (const b of document.querySelectorAll("[data-tab]")) b.classList.toggle("active", b.dataset.tab === name);
    for (const p of document.querySelectorAll(".panel")) p.classList.toggle("hidden", p.id !== "tab-" + name);
    if (name === "audit") loadAudit();
    if (name === "suggest") loadSuggest();
  }

  function connect() {
    const link = $("#link");
    const es = new EventSource("api/events");
    es.addEventListener("open", function () { link.textContent = "live"; link.classList.add("live"); });
    es.addEventListener("error", function () {
      link.classList.remove("live");
      link.textContent = es.readyState === EventSource.CLOSED ? "disconnected (reload)" : "reconnecting…";
    });
    es.addEventListener("now", function (e) { skew = parseFloat(e.data) - Date.now() / 1000; });
    es.addEventListener("requests", function (e) { renderRequests(JSON.parse(e.data)); });
    es.addEventListener("sessions", function (e) { renderSessions(JSON.parse(e.data)); });
    es.addEventListener("audit", function () { if (tab === "audit") loadAudit(); });
  }
  connect();
})();
