/* cairn fleet dashboard: the fleet page (every ticket, live) and the ticket page.
 *
 * Vanilla JS, no build step, no CDN. Both pages read the JSON API (docs/fleet.md):
 * the fleet page polls GET /api/v1/state every second and updates its rows in place; the ticket
 * page polls GET /api/v1/tickets/{id}. Everything from the server is put in the page as text
 * (textContent), never as HTML, so a ticket's summary or diff cannot inject markup.
 */
(function () {
  "use strict";

  var POLL_MS = 1000;
  var TICKET_POLL_MS = 2000;
  var TOKEN = new URLSearchParams(location.search).get("token");

  /* --- helpers -------------------------------------------------------------------------- */

  function withToken(path) {
    if (!TOKEN) return path;
    return path + (path.indexOf("?") < 0 ? "?" : "&") + "token=" + encodeURIComponent(TOKEN);
  }

  function api(method, path, body) {
    var headers = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(withToken(path), {
      method: method,
      headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
    }).then(function (response) {
      return response.text().then(function (text) {
        var body = null;
        try {
          body = text ? JSON.parse(text) : null;
        } catch (e) {
          body = null;
        }
        if (!response.ok) {
          var error = (body && body.error) || {};
          var err = new Error(error.message || "HTTP " + response.status);
          err.status = response.status;
          err.code = error.code || "http_" + response.status;
          throw err;
        }
        return body;
      });
    });
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function setText(node, text) {
    text = text === undefined || text === null ? "" : String(text);
    if (node.textContent !== text) node.textContent = text;
  }

  function age(seconds) {
    if (seconds === null || seconds === undefined) return "";
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return seconds + "s";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m";
    if (seconds < 86400) return Math.floor(seconds / 3600) + "h" + pad(Math.floor((seconds % 3600) / 60));
    return Math.floor(seconds / 86400) + "d";
  }

  function pad(n) {
    return n < 10 ? "0" + n : String(n);
  }

  function until(iso, now) {
    if (!iso) return null;
    var at = Date.parse(iso);
    if (isNaN(at)) return null;
    return Math.round((at - now) / 1000);
  }

  function inTime(iso, now) {
    var seconds = until(iso, now);
    if (seconds === null) return "–";
    return seconds <= 0 ? "due" : "in " + age(seconds);
  }

  function number(n) {
    return n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US");
  }

  function money(x) {
    return x === null || x === undefined ? "–" : "$" + Number(x).toFixed(2);
  }

  function fraction(a, b) {
    if (a === null || a === undefined) return "";
    return b === null || b === undefined ? String(a) : a + "/" + b;
  }

  function shortPath(path) {
    // the worktree's folder and its parent (<repo>.cairn/<ticket>); the full path is the title
    if (!path) return "";
    var parts = path.split("/").filter(Boolean);
    return parts.length > 2 ? "…/" + parts.slice(-2).join("/") : path;
  }

  function ticketHref(ticket) {
    return withToken("/tickets/" + encodeURIComponent(ticket));
  }

  function setLive(ok, message) {
    var live = document.getElementById("live");
    live.className = "live " + (ok ? "ok" : "down");
    setText(live, message);
  }

  /* --- acting on a ticket: POST /api/v1/tickets/{id}/pause|resume|stop|retry --------------- */

  var ACTIONS = ["pause", "resume", "stop", "retry"];

  // the buttons of one ticket, in `parent`; each carries data-action and is enabled by fill
  function actionButtons(parent) {
    var buttons = {};
    ACTIONS.forEach(function (action) {
      var button = el("button", "act act-" + action, action);
      button.type = "button";
      button.dataset.action = action;
      parent.appendChild(button);
      buttons[action] = button;
    });
    return buttons;
  }

  // `why`: action → null when it acts, else why not (shown as the disabled button's title)
  function fillButtons(buttons, why) {
    ACTIONS.forEach(function (action) {
      var reason = why[action];
      var button = buttons[action];
      var off = reason !== null;
      if (button.disabled !== off) button.disabled = off;
      var title = off ? reason : action + " this ticket";
      if (button.title !== title) button.title = title;
    });
  }

  // what the last button did, until the next one (the live status is the poll's)
  function notice(ok, message) {
    var node = document.getElementById("notice");
    node.className = "notice " + (ok ? "ok" : "down");
    setText(node, message);
  }

  function act(ticket, action, done) {
    api("POST", "/api/v1/tickets/" + encodeURIComponent(ticket) + "/" + action)
      .then(function (answer) {
        var said = answer.changed ? action + " asked: " + answer.state : "unchanged: " + answer.state;
        notice(true, ticket + ": " + said + (answer.pending ? " (the supervisor acts on it)" : ""));
      })
      .catch(function (err) {
        notice(false, ticket + ": " + err.message);
      })
      .then(done || function () {});
  }

  /* --- answering a ticket that waits for input: POST /api/v1/tickets/{id}/answer ----------- */

  // a textarea and an Answer button for `ticket`; what the POST did is said beside it and in
  // the notice; `done` runs after it (the next poll shows where the ticket went)
  function answerBox(ticket, done) {
    var box = el("div", "answer");
    var text = el("textarea");
    text.rows = 2;
    text.setAttribute("aria-label", "answer to " + ticket);
    text.placeholder = "your answer to the agent";
    var button = el("button", "answer-send", "Answer");
    button.type = "button";
    var said = el("span", "answer-said");
    said.setAttribute("role", "status");
    box.appendChild(text);
    box.appendChild(button);
    box.appendChild(said);
    button.addEventListener("click", function () {
      if (!text.value.trim()) {
        setText(said, "write an answer first");
        return;
      }
      button.disabled = true;
      setText(said, "answering…");
      api("POST", "/api/v1/tickets/" + encodeURIComponent(ticket) + "/answer", { text: text.value })
        .then(function () {
          text.value = "";
          said.className = "answer-said ok";
          setText(said, "answered; resuming");
          notice(true, ticket + ": answered; resuming");
        })
        .catch(function (err) {
          said.className = "answer-said down";
          setText(said, err.message);
          notice(false, ticket + ": " + err.message);
        })
        .then(function () {
          button.disabled = false;
          if (done) done();
        });
    });
    return box;
  }

  /* --- the fleet page's "Needs you": needs_you of GET /api/v1/state, oldest first ---------- */

  var NEED_WORDS = {
    needs_input: "waits for your answer",
    needs_review: "waits for your review",
    budget: "stopped at the fleet's budget",
    failed: "failed",
    waiting: "waits for a usage limit's reset",
    interrupted: "interrupted",
  };

  function needYou(n) {
    return n + (n === 1 ? " needs you" : " need you");
  }

  function needsView() {
    var section = document.getElementById("needs");
    var list = document.getElementById("needs-list");
    var entries = new Map(); // ticket → {li, state, parts}

    function make(need) {
      var li = el("li", "need");
      li.dataset.ticket = need.ticket;
      li.dataset.state = need.state;
      var head = el("p", "need-head");
      var link = el("a", "need-ticket", need.ticket);
      link.href = ticketHref(need.ticket);
      head.appendChild(link);
      head.appendChild(document.createTextNode(" "));
      head.appendChild(el("span", "state s-" + need.state, NEED_WORDS[need.state] || need.state.replace(/_/g, " ")));
      var waited = el("span", "need-waited");
      head.appendChild(waited);
      li.appendChild(head);
      var detail = el("p", "need-detail");
      var todo = el("p", "need-todo");
      li.appendChild(detail);
      li.appendChild(todo);
      if (need.state === "needs_input") li.appendChild(answerBox(need.ticket));
      return { li: li, state: need.state, parts: { waited: waited, detail: detail, todo: todo } };
    }

    return function render(needs, now) {
      var seen = new Set();
      var cursor = list.firstChild;
      needs.forEach(function (need) {
        seen.add(need.ticket);
        var entry = entries.get(need.ticket);
        if (entry && entry.state !== need.state) {
          entry.li.remove();
          entry = null;
        }
        if (!entry) {
          entry = make(need);
          entries.set(need.ticket, entry);
        }
        var since = Date.parse(need.since);
        var waited = isNaN(since) ? need.waited_s : (now - since) / 1000;
        setText(entry.parts.waited, waited === null || waited === undefined ? "" : "waited " + age(waited));
        setText(entry.parts.detail, need.detail || "");
        entry.parts.detail.hidden = !need.detail;
        setText(entry.parts.todo, need.to_do ? "to do: " + need.to_do : "");
        entry.parts.todo.hidden = !need.to_do;
        if (entry.li === cursor) cursor = cursor.nextSibling;
        else list.insertBefore(entry.li, cursor);
      });
      entries.forEach(function (entry, ticket) {
        if (!seen.has(ticket)) {
          entry.li.remove();
          entries.delete(ticket);
        }
      });
      section.hidden = needs.length === 0;
      setText(document.getElementById("needs-count"), needYou(needs.length));
    };
  }

  /* --- the fleet page --------------------------------------------------------------------- */

  var COLUMNS = ["ticket", "state", "phase", "task", "attempt", "turns", "snapshot", "worktree", "last", "actions"];

  function cells(row, now) {
    var attempt = fraction(row.attempt, row.max_attempts);
    var detail = row.detail || "";
    if (row.state === "retrying" || row.state === "waiting") {
      attempt += " · next try " + inTime(row.next_attempt_at, now);
      detail = row.last_error || row.detail || row.last_reason || "";
    }
    if (row.outbox && row.outbox.pending) {  // what the tracker and the webhooks have not heard yet
      detail += (detail ? " · " : "") + row.outbox.pending + " messages not told yet" +
        (row.outbox.unknown ? " (" + row.outbox.unknown + " unknown: looked for before sent again)" : "");
    }
    var usage = row.usage && row.usage.total_tokens ? number(row.usage.total_tokens) + " tokens" : "";
    if (usage && row.usage.cost_usd !== null && row.usage.cost_usd !== undefined) {
      usage += " · " + money(row.usage.cost_usd);
    }
    return {
      ticket: label(row),
      state: row.state,
      phase: row.phase || "",
      task: fraction(row.task, row.total),
      attempt: attempt,
      turns: fraction(row.turn, row.max_turns),
      snapshot: row.snapshot ? row.snapshot + " · " + age(row.snapshot_age_seconds) : "",
      worktree: shortPath(row.worktree),
      last: row.last_event ? row.last_event + " · " + age(row.last_event_age_seconds) : "",
      detail: detail,
      usage: usage,
      actions: (row.actions || []).join(" "),
    };
  }

  // a refused entry (the tracker could not take it) has no ticket page: it is named by its
  // ticket when it names one, else by its plan, and keyed by its plan
  function label(row) {
    return row.ticket || row.plan || "";
  }

  function rowKey(row) {
    return row.state === "refused" ? "refused:" + row.plan : row.ticket;
  }

  function makeRow(row) {
    var tr = el("tr", "row");
    tr.dataset.ticket = label(row);
    var parts = {};
    COLUMNS.forEach(function (name) {
      var td = el("td", "c-" + name);
      if (name === "ticket") {
        var a = el(row.state === "refused" ? "span" : "a", null, label(row));
        if (row.state !== "refused") a.href = ticketHref(row.ticket);
        td.appendChild(a);
        parts.usage = el("span", "usage");
        td.appendChild(parts.usage);
        parts[name] = a;
      } else if (name === "state") {
        parts[name] = el("span", "state");
        td.appendChild(parts[name]);
      } else if (name === "actions") {
        // its buttons are added after the rows are painted (addButtons): 4,000 buttons in
        // the first paint of 1,000 rows cost it a third more
        parts.actions = row.state === "refused" ? null : td;
        parts.buttons = null;
      } else {
        parts[name] = td;
      }
      tr.appendChild(td);
    });
    var more = el("tr", "more");
    var td = el("td", "detail");
    td.colSpan = COLUMNS.length;
    more.appendChild(td);
    parts.detail = td;
    return { tr: tr, more: more, parts: parts, key: null };
  }

  function fillRow(entry, row, now) {
    var values = cells(row, now);
    var key = JSON.stringify(values);
    if (key === entry.key) return;
    entry.key = key;
    COLUMNS.forEach(function (name) {
      if (name !== "ticket" && name !== "actions") setText(entry.parts[name], values[name]);
    });
    if (entry.parts.actions) {
      var can = row.actions || [];
      var why = {};
      ACTIONS.forEach(function (action) {
        why[action] = can.indexOf(action) >= 0 ? null : "not applicable while " + row.state + " (the ticket page says why)";
      });
      entry.why = why;
      if (entry.parts.buttons) fillButtons(entry.parts.buttons, why);
    }
    setText(entry.parts.usage, values.usage);
    entry.parts.state.className = "state s-" + row.state;
    if (entry.tr.dataset.state !== row.state) entry.tr.dataset.state = row.state;
    setText(entry.parts.detail, values.detail);
    if (entry.parts.worktree.title !== (row.worktree || "")) entry.parts.worktree.title = row.worktree || "";
    entry.hasDetail = !!values.detail;
    entry.more.dataset.state = row.state;
  }

  function fleetPage() {
    var body = document.getElementById("rows");
    var entries = new Map();
    var filter = document.getElementById("filter");
    var stateFilter = null;
    var last = null;
    var renderNeeds = needsView();

    function visible(row) {
      var text = filter.value.trim().toLowerCase();
      if (stateFilter && row.state !== stateFilter) return false;
      return !text || label(row).toLowerCase().indexOf(text) >= 0;
    }

    function header(state, now) {
      var agents = state.agents || {};
      setText(document.getElementById("agents"), fraction(agents.running, agents.max) || "–");
      var usage = state.usage || {};
      setText(document.getElementById("tokens"), number(usage.total_tokens));
      setText(document.getElementById("cost"), money(usage.cost_usd));
      var sup = state.supervisor || {};
      setText(document.getElementById("next-poll"), sup.running ? inTime(state.next_poll_at, now) : "–");
      setText(document.getElementById("supervisor"), sup.running ? "running (pid " + sup.pid + ")" : "not running");
      document.getElementById("refresh").disabled = !sup.running;
      var held = state.held || [];
      document.getElementById("held-box").hidden = !held.length;
      setText(document.getElementById("held"), held.map(function (h) {
        return h.agent + " (" + h.limit.replace("_", " ") + ", resets " + inTime(h.resets_at, now) + ")";
      }).join(", "));
      var counts = document.getElementById("counts");
      var wanted = Object.keys(state.counts || {}).filter(function (k) {
        return state.counts[k] > 0;
      });
      var key = JSON.stringify([state.counts, stateFilter]);
      if (counts.dataset.key !== key) {
        counts.dataset.key = key;
        counts.textContent = "";
        wanted.forEach(function (name) {
          var chip = el("button", "chip s-" + name + (stateFilter === name ? " on" : ""), name + " " + state.counts[name]);
          chip.type = "button";
          chip.dataset.state = name;
          counts.appendChild(chip);
        });
      }
      var needing = (state.needs_you || []).length;
      document.title = "cairn fleet · " + (needing ? needYou(needing) + " · " : "") + (agents.running || 0) + " running";
    }

    function render(state) {
      var started = performance.now();
      var first = !last;
      var now = Date.now();
      last = state;
      header(state, now);
      renderNeeds(state.needs_you || [], now);
      var rows = state.tickets || [];
      var seen = new Set();
      // first paint builds every row off-document; later polls move a row only when it is not
      // already where the API's order puts it
      var target = body.firstChild ? body : document.createDocumentFragment();
      var cursor = body.firstChild;
      rows.forEach(function (row) {
        var key = rowKey(row);
        seen.add(key);
        var entry = entries.get(key);
        if (!entry) {
          entry = makeRow(row);
          entries.set(key, entry);
        }
        fillRow(entry, row, now);
        var show = visible(row);
        if (entry.tr.hidden === show) entry.tr.hidden = !show;
        if (entry.more.hidden !== (!show || !entry.hasDetail)) entry.more.hidden = !show || !entry.hasDetail;
        if (entry.tr === cursor) {
          cursor = entry.more.nextSibling;
        } else {
          target.insertBefore(entry.tr, cursor);
          target.insertBefore(entry.more, cursor);
        }
      });
      if (target !== body) body.appendChild(target);
      addButtons();
      entries.forEach(function (entry, key) {
        if (!seen.has(key)) {
          entry.tr.remove();
          entry.more.remove();
          entries.delete(key);
        }
      });
      document.getElementById("empty").hidden = rows.length > 0;
      document.getElementById("tickets").hidden = rows.length === 0;
      // timings for bench/dashboard_page.py: the last render's cost, and when the first rows
      // were painted (a task queued from the next frame runs after that frame's paint)
      window.__cairnRenderMs = performance.now() - started;
      if (first) {
        performance.mark("cairn-rows-rendered");
        requestAnimationFrame(function () {
          setTimeout(function () {
            performance.mark("cairn-rows-painted");
          }, 0);
        });
      }
    }

    // the rows' buttons, 200 rows a task once the rows are on the page, so they never hold up
    // a paint
    var adding = false;
    function addButtons() {
      if (adding) return;
      adding = true;
      setTimeout(function step() {
        var done = 0;
        entries.forEach(function (entry) {
          if (done >= 200 || !entry.parts.actions || entry.parts.buttons) return;
          entry.parts.buttons = actionButtons(entry.parts.actions);
          if (entry.why) fillButtons(entry.parts.buttons, entry.why);
          done += 1;
        });
        if (done >= 200) setTimeout(step, 0);
        else adding = false;
      }, 0);
    }

    function poll() {
      api("GET", "/api/v1/state")
        .then(function (state) {
          render(state);
          setLive(true, "live · " + new Date().toLocaleTimeString());
        })
        .catch(function (err) {
          setLive(false, "disconnected: " + err.message + " — retrying");
        })
        .then(function () {
          setTimeout(poll, POLL_MS);
        });
    }

    filter.addEventListener("input", function () {
      if (last) render(last);
    });
    document.getElementById("counts").addEventListener("click", function (event) {
      var chip = event.target.closest("button.chip");
      if (!chip) return;
      stateFilter = stateFilter === chip.dataset.state ? null : chip.dataset.state;
      if (last) render(last);
    });
    body.addEventListener("click", function (event) {
      var button = event.target.closest("button.act");
      if (!button || button.disabled) return;
      var tr = button.closest("tr");
      button.disabled = true;
      act(tr.dataset.ticket, button.dataset.action, function () {
        entries.forEach(function (entry) {
          entry.key = null; // every row filled again at the next poll
        });
      });
    });
    document.getElementById("refresh").addEventListener("click", function () {
      api("POST", "/api/v1/refresh")
        .then(function (answer) {
          setLive(true, answer && answer.coalesced ? "poll already queued" : "poll queued");
        })
        .catch(function (err) {
          setLive(false, err.message);
        });
    });
    poll();
  }

  /* --- markdown: a small renderer that builds DOM nodes, never HTML ----------------------- */

  function inline(parent, text) {
    // `code` and **bold**; everything else is text
    var pattern = /(`+)([\s\S]*?)\1|\*\*([^*]+)\*\*/g;
    var at = 0;
    var match;
    while ((match = pattern.exec(text)) !== null) {
      if (match.index > at) parent.appendChild(document.createTextNode(text.slice(at, match.index)));
      if (match[1]) parent.appendChild(el("code", null, match[2]));
      else parent.appendChild(el("strong", null, match[3]));
      at = pattern.lastIndex;
    }
    if (at < text.length) parent.appendChild(document.createTextNode(text.slice(at)));
  }

  function markdown(target, source) {
    target.textContent = "";
    var lines = String(source || "").replace(/\r\n?/g, "\n").split("\n");
    var i = 0;
    if (lines[0] === "---") {
      // YAML front matter: the summary's metadata, not its text
      var end = lines.indexOf("---", 1);
      if (end > 0) i = end + 1;
    }
    var paragraph = null;
    var list = null;
    function close() {
      paragraph = null;
      list = null;
    }
    for (; i < lines.length; i++) {
      var line = lines[i];
      var fence = /^\s*(```|~~~)/.exec(line);
      if (fence) {
        close();
        var code = [];
        for (i++; i < lines.length && lines[i].trim().indexOf(fence[1]) !== 0; i++) code.push(lines[i]);
        var pre = el("pre", "code");
        pre.appendChild(el("code", null, code.join("\n")));
        target.appendChild(pre);
        continue;
      }
      if (!line.trim()) {
        close();
        continue;
      }
      var heading = /^(#{1,6})\s+(.*)$/.exec(line);
      if (heading) {
        close();
        var h = el("h" + Math.min(6, heading[1].length + 2));
        inline(h, heading[2]);
        target.appendChild(h);
        continue;
      }
      var item = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line);
      if (item) {
        var ordered = /\d/.test(item[1]);
        var tag = ordered ? "OL" : "UL";
        if (!list || list.tagName !== tag) {
          paragraph = null;
          list = el(tag.toLowerCase());
          target.appendChild(list);
        }
        var li = el("li");
        var text = item[2];
        var box = /^\[([ xX])\]\s+(.*)$/.exec(text);
        if (box) {
          li.className = box[1] === " " ? "todo" : "done";
          li.appendChild(el("span", "box", box[1] === " " ? "☐ " : "☑ "));
          text = box[2];
        }
        inline(li, text);
        list.appendChild(li);
        continue;
      }
      if (list && /^\s+\S/.test(line)) {
        // a continuation of the last list item
        var lastItem = list.lastChild;
        lastItem.appendChild(document.createTextNode(" "));
        inline(lastItem, line.trim());
        continue;
      }
      list = null;
      if (!paragraph) {
        paragraph = el("p");
        target.appendChild(paragraph);
      } else {
        paragraph.appendChild(document.createTextNode(" "));
      }
      inline(paragraph, line.trim());
    }
  }

  /* --- the ticket page -------------------------------------------------------------------- */

  function diff(target, text, empty) {
    target.textContent = "";
    if (!text) {
      target.appendChild(el("span", "none", empty));
      return;
    }
    var fragment = document.createDocumentFragment();
    text.split("\n").forEach(function (line) {
      var kind = "";
      if (/^(diff |index |--- |\+\+\+ )/.test(line)) kind = "meta";
      else if (line.charAt(0) === "+") kind = "add";
      else if (line.charAt(0) === "-") kind = "del";
      else if (line.indexOf("@@") === 0) kind = "hunk";
      fragment.appendChild(el("span", kind ? "l " + kind : "l", line + "\n"));
    });
    target.appendChild(fragment);
  }

  function facts(target, row) {
    target.textContent = "";
    var now = Date.now();
    var items = [
      ["plan", row.plan],
      ["branch", row.branch],
      ["worktree", row.worktree],
      ["phase", row.phase],
      ["task", fraction(row.task, row.total)],
      ["attempt", fraction(row.attempt, row.max_attempts)],
      ["turns", fraction(row.turn, row.max_turns)],
      ["run", row.run ? row.run + (row.run_state ? " (" + row.run_state + ")" : "") : null],
      ["last event", row.last_event ? row.last_event + " · " + age(row.last_event_age_seconds) + " ago" : null],
      ["last exit", row.last_exit === null || row.last_exit === undefined ? null : row.last_exit + (row.last_reason ? " (" + row.last_reason + ")" : "")],
      ["next try", row.state === "retrying" || row.state === "waiting" ? inTime(row.next_attempt_at, now) : null],
      ["tokens", row.usage ? number(row.usage.total_tokens) : null],
      ["cost", row.usage && row.usage.cost_usd !== null && row.usage.cost_usd !== undefined ? money(row.usage.cost_usd) : null],
    ];
    items.forEach(function (pair) {
      if (pair[1] === null || pair[1] === undefined || pair[1] === "") return;
      var div = el("div");
      div.appendChild(el("dt", null, pair[0]));
      div.appendChild(el("dd", null, pair[1]));
      target.appendChild(div);
    });
  }

  function snapshots(target, list) {
    target.textContent = "";
    if (!list || !list.length) {
      target.appendChild(el("p", "none", "No snapshot yet."));
      return;
    }
    list.forEach(function (snap) {
      var box = el("div", "snapshot");
      var head = el("p", "snap-head");
      head.appendChild(el("code", null, snap.ref));
      head.appendChild(document.createTextNode(" "));
      head.appendChild(el("code", "sha", String(snap.commit || "").slice(0, 10)));
      head.appendChild(document.createTextNode(" · " + age(snap.age_seconds) + " ago" + (snap.reason ? " · " + snap.reason : "")));
      box.appendChild(head);
      (snap.inspect || []).forEach(function (command) {
        var pre = el("pre", "cmd");
        pre.appendChild(el("code", null, command));
        box.appendChild(pre);
      });
      target.appendChild(box);
    });
  }

  // each event as its sentence (`text`, the server's: cairn run's and catchup's words); with
  // `raw`, its name and its JSON fields instead
  function journal(target, events, raw) {
    target.textContent = "";
    (events || []).forEach(function (event) {
      var tr = el("tr");
      var rest = {};
      Object.keys(event).forEach(function (k) {
        if (k !== "t" && k !== "event" && k !== "text") rest[k] = event[k];
      });
      var when = event.t ? String(event.t).replace("T", " ").replace(/\.\d+/, "").replace("+00:00", "Z") : "";
      tr.appendChild(el("td", "when", when));
      if (raw) {
        tr.appendChild(el("td", "event", event.event));
        tr.appendChild(el("td", "fields", Object.keys(rest).length ? JSON.stringify(rest) : ""));
      } else {
        tr.appendChild(el("td", "sentence e-" + event.event, event.text || event.event));
      }
      target.appendChild(tr);
    });
    if (!target.firstChild) {
      var tr = el("tr");
      tr.appendChild(el("td", "none", "No journal yet."));
      target.appendChild(tr);
    }
  }

  // the transcript of the dispatch shown, followed while the ticket runs: each poll asks for the
  // lines after those it has
  function transcriptView(ticket) {
    var target = document.getElementById("transcript");
    var nav = document.getElementById("dispatches");
    var chosen = null; // null: the latest dispatch
    var shown = null; // the dispatch whose lines are on the page
    var next = 0;
    var busy = false;

    function line(item) {
      var classes = "t t-" + item.kind + (item.denied ? " denied" : "");
      var span = el("span", classes, item.text + "\n");
      if (item.at) span.title = item.at;
      if (item.tool) span.dataset.tool = item.tool;
      return span;
    }

    function tabs(list, current) {
      var key = JSON.stringify([list, current]);
      if (nav.dataset.key === key) return;
      nav.dataset.key = key;
      nav.textContent = "";
      list.forEach(function (d) {
        var b = el("button", "dispatch" + (d.number === current ? " on" : ""), d.number + " · " + d.role);
        b.type = "button";
        b.dataset.number = String(d.number);
        nav.appendChild(b);
      });
    }

    function load() {
      if (busy) return;
      busy = true;
      var since = chosen === null || chosen === shown ? next : 0;
      var query = "?since=" + since + (chosen ? "&dispatch=" + chosen : "");
      var again = false;
      api("GET", "/api/v1/tickets/" + encodeURIComponent(ticket) + "/transcript" + query)
        .then(function (data) {
          if (data.dispatch !== shown) {
            target.textContent = "";
            shown = data.dispatch;
            next = 0;
            if (since > 0) {
              again = true; // a new dispatch began: its lines from the first
              return;
            }
          }
          tabs(data.dispatches || [], data.dispatch);
          setText(document.getElementById("transcript-what"), data.dispatch ? "(dispatch " + data.dispatch + " · " + data.role + (data.live ? " · following" : "") + ")" : "");
          var fragment = document.createDocumentFragment();
          (data.lines || []).forEach(function (item) {
            fragment.appendChild(line(item));
          });
          var atEnd = target.scrollTop + target.clientHeight >= target.scrollHeight - 4;
          target.appendChild(fragment);
          if (atEnd) target.scrollTop = target.scrollHeight;
          next = data.next;
          if (!target.firstChild) target.appendChild(el("span", "none", "No transcript yet."));
          else if (target.firstChild.className === "none" && target.childNodes.length > 1) target.firstChild.remove();
          again = !!data.more;
        })
        .catch(function () {})
        .then(function () {
          busy = false;
          if (again) setTimeout(load, 0);
        });
    }

    nav.addEventListener("click", function (event) {
      var b = event.target.closest("button.dispatch");
      if (!b) return;
      chosen = Number(b.dataset.number);
      shown = null;
      load();
    });
    return load;
  }

  /* --- the ticket page's review: comments on lines of the branch diff, then a verdict ------ */

  function reviewPost(path, body) {
    return fetch(withToken(path), {
      method: "POST",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      cache: "no-store",
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok) {
          var error = (answer && answer.error) || {};
          throw new Error(error.message || "HTTP " + response.status);
        }
        return answer;
      });
    });
  }

  // Each line of the branch diff that a comment may be on (an added or a context line) gets
  // its file and its line number on the branch: data-path, data-line.
  function reviewLines(target) {
    var path = null;
    var line = 0;
    Array.prototype.forEach.call(target.querySelectorAll(".l"), function (node) {
      var text = node.textContent.replace(/\n$/, "");
      if (text.indexOf("+++ ") === 0) {
        path = text.indexOf("+++ b/") === 0 ? text.slice(6) : null;
        line = 0;
        return;
      }
      var hunk = /^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(text);
      if (hunk) {
        line = Number(hunk[1]);
        return;
      }
      if (/^(diff |index |--- )/.test(text)) return;
      if (path && line && (text.charAt(0) === "+" || text.charAt(0) === " ")) {
        node.dataset.path = path;
        node.dataset.line = String(line);
        node.classList.add("commentable");
        line += 1;
      }
    });
  }

  function reviewChip(status) {
    return el("span", "chip r-" + String(status).toLowerCase(), status);
  }

  function reviewRounds(target, reviews) {
    target.textContent = "";
    if (!reviews || !reviews.length) {
      target.appendChild(el("p", "none", "No review yet."));
      return;
    }
    reviews.forEach(function (review) {
      var box = el("div", "review-round");
      var head = review.verdict === "approve" ? "Approved" : "Round " + review.round + ": changes requested";
      head += " by " + review.by + (review.commit ? " at " + String(review.commit).slice(0, 10) : "");
      box.appendChild(el("p", "review-head", head));
      var list = el("ul", "review-list");
      (review.comments || []).forEach(function (comment) {
        var item = el("li", "review-comment");
        item.dataset.comment = comment.id;
        item.appendChild(el("b", null, comment.id + " "));
        item.appendChild(el("code", null, comment.path + ":" + comment.line));
        item.appendChild(document.createTextNode(" "));
        if (review.verdict !== "approve") item.appendChild(reviewChip(comment.status));
        if (comment.outdated) item.appendChild(el("span", "chip r-outdated", "outdated"));
        else if (comment.line_now && comment.line_now !== comment.line) {
          item.appendChild(el("span", "chip r-moved", "now line " + comment.line_now));
        }
        item.appendChild(el("p", "review-body", comment.body));
        if (comment.action) item.appendChild(el("p", "review-action", "agent: " + comment.action));
        list.appendChild(item);
      });
      box.appendChild(list);
      target.appendChild(box);
    });
  }

  function reviewPanel(ticket) {
    var url = "/api/v1/tickets/" + encodeURIComponent(ticket) + "/review";
    var draft = [];
    var at = null; // the line being commented on: {path, line}
    var form = document.getElementById("review-form");
    var body = document.getElementById("review-body");
    var said = document.getElementById("review-said");
    var shown = null;

    function showDraft() {
      var list = document.getElementById("review-draft");
      list.textContent = "";
      draft.forEach(function (comment, n) {
        var item = el("li", "review-comment draft");
        item.appendChild(el("code", null, comment.path + ":" + comment.line));
        item.appendChild(el("span", null, " " + comment.body + " "));
        var drop = el("button", "link", "remove");
        drop.type = "button";
        drop.addEventListener("click", function () {
          draft.splice(n, 1);
          showDraft();
        });
        item.appendChild(drop);
        list.appendChild(item);
      });
    }

    document.getElementById("branch-diff").addEventListener("click", function (event) {
      var node = event.target.closest ? event.target.closest(".commentable") : null;
      if (!node) return;
      Array.prototype.forEach.call(document.querySelectorAll(".l.selected"), function (other) {
        other.classList.remove("selected");
      });
      node.classList.add("selected");
      at = { path: node.dataset.path, line: Number(node.dataset.line) };
      setText(document.getElementById("review-where"), "Comment on " + at.path + ":" + at.line);
      form.hidden = false;
      body.focus();
    });
    document.getElementById("review-add").addEventListener("click", function () {
      if (!at || !body.value.trim()) return;
      draft.push({ path: at.path, line: at.line, body: body.value.trim() });
      body.value = "";
      form.hidden = true;
      showDraft();
    });
    document.getElementById("review-cancel").addEventListener("click", function () {
      body.value = "";
      form.hidden = true;
    });

    function send(verdict) {
      setText(said, "sending…");
      reviewPost(url, { verdict: verdict, comments: draft })
        .then(function (answer) {
          draft = [];
          showDraft();
          setText(said, verdict === "approve" ? "approved" : "fix round " + answer.round + " asked");
          refresh();
        })
        .catch(function (err) {
          setText(said, err.message);
        });
    }
    document.getElementById("review-request").addEventListener("click", function () {
      send("request_changes");
    });
    document.getElementById("review-approve").addEventListener("click", function () {
      send("approve");
    });

    function refresh() {
      return api("GET", url)
        .then(function (data) {
          var key = JSON.stringify(data.reviews);
          if (key !== shown) {
            shown = key;
            reviewRounds(document.getElementById("review-rounds"), data.reviews);
          }
        })
        .catch(function () {});
    }

    function poll() {
      refresh().then(function () {
        setTimeout(poll, TICKET_POLL_MS);
      });
    }
    poll();
    return { lines: function () { reviewLines(document.getElementById("branch-diff")); } };
  }

  /* --- the ticket page's land: merge the ticket's branch into the fleet's base ------------- */

  function landSaid(answer) {
    if (answer.landed) {
      var how = answer.how === "already" ? "already there" : answer.how === "fast_forward"
        ? "a fast-forward" : "merge " + String(answer.merge).slice(0, 10);
      return "landed on " + answer.base + " (" + how + ")";
    }
    return "conflicts with " + answer.base + " in " + (answer.conflicts || []).join(", ") +
      ": fix round " + answer.round + " asked; it lands once that passes";
  }

  function landPanel(ticket) {
    var url = "/api/v1/tickets/" + encodeURIComponent(ticket) + "/land";
    var button = document.getElementById("land-button");
    var reason = document.getElementById("land-reason");
    var said = document.getElementById("land-said");

    function show(data) {
      setText(document.getElementById("land-what"), "(" + data.branch + " into " + data.base + ")");
      var why = data.reason;
      if (!why && data.landed) why = data.branch + " is on " + data.base;
      else if (data.waiting && !data.landable) why = "waits for its fix round: " + (data.reason || "");
      button.disabled = !data.landable || data.landed;
      button.title = why || "";
      setText(reason, why || "");
    }

    button.addEventListener("click", function () {
      button.disabled = true;
      setText(said, "landing…");
      reviewPost(url, {})
        .then(function (answer) {
          setText(said, landSaid(answer));
          refresh();
        })
        .catch(function (err) {
          setText(said, err.message);
          refresh();
        });
    });

    function refresh() {
      return api("GET", url).then(show).catch(function () {});
    }

    function poll() {
      refresh().then(function () {
        setTimeout(poll, TICKET_POLL_MS);
      });
    }
    poll();
  }

  function ticketPage() {
    var parts = location.pathname.split("/").filter(Boolean);
    var ticket = decodeURIComponent(parts[parts.length - 1] || "");
    var seen = {};
    var loadTranscript = transcriptView(ticket);
    var buttons = actionButtons(document.getElementById("buttons"));
    var lastJournal = [];
    var rawJournal = document.getElementById("raw-journal");
    rawJournal.addEventListener("change", function () {
      journal(document.getElementById("journal"), lastJournal, rawJournal.checked);
    });
    document.getElementById("buttons").addEventListener("click", function (event) {
      var button = event.target.closest("button.act");
      if (!button || button.disabled) return;
      button.disabled = true;
      act(ticket, button.dataset.action, function () {
        seen = {};
      });
    });
    setText(document.getElementById("ticket-id"), ticket);
    document.getElementById("back").href = withToken("/");
    document.title = "cairn · " + ticket;
    var review = reviewPanel(ticket);
    landPanel(ticket);

    function changed(name, value) {
      var key = JSON.stringify(value === undefined ? null : value);
      if (seen[name] === key) return false;
      seen[name] = key;
      return true;
    }

    function render(data) {
      var row = data.ticket || {};
      var state = document.getElementById("ticket-state");
      state.className = "state s-" + row.state;
      setText(state, row.state);
      document.getElementById("error").hidden = true;
      if (changed("row", row)) facts(document.getElementById("facts"), row);
      var detail = document.getElementById("detail");
      var why = row.state === "retrying" ? row.last_error || row.detail : row.detail;
      detail.hidden = !why;
      setText(detail, why || "");
      var answer = document.getElementById("answer");
      var asking = row.state === "needs_input";
      if (asking && !answer.firstChild) answer.appendChild(answerBox(ticket, function () { seen = {}; }));
      if (!asking && answer.firstChild) answer.textContent = "";
      answer.hidden = !asking;
      if (changed("summary", data.summary)) {
        var summary = document.getElementById("summary");
        if (data.summary) markdown(summary, data.summary);
        else {
          summary.textContent = "";
          summary.appendChild(el("p", "none", "No change summary yet."));
        }
      }
      if (changed("branch", [data.branch_diff, row.branch])) {
        setText(document.getElementById("branch-diff-what"), row.branch ? "(" + row.branch + " against its base)" : "");
        diff(document.getElementById("branch-diff"), data.branch_diff, "No commits on the branch yet.");
        review.lines();
      }
      if (changed("snapshot", data.snapshot_diff)) {
        diff(document.getElementById("snapshot-diff"), data.snapshot_diff, "Nothing uncommitted in the latest snapshot.");
      }
      if (changed("snapshots", data.snapshots)) snapshots(document.getElementById("snapshots"), data.snapshots);
      if (changed("journal", data.journal)) {
        lastJournal = data.journal || [];
        journal(document.getElementById("journal"), lastJournal, rawJournal.checked);
      }
      if (changed("actions", data.actions)) {
        var why = data.actions || {};
        var all = {};
        ACTIONS.forEach(function (action) {
          all[action] = action in why ? why[action] : "no fleet record";
        });
        fillButtons(buttons, all);
        var list = document.getElementById("why-not");
        list.textContent = "";
        ACTIONS.forEach(function (action) {
          if (all[action] !== null) list.appendChild(el("li", null, action + ": " + all[action]));
        });
      }
      if (changed("pull", data.pull_request)) {
        var pull = document.getElementById("pull");
        var linkable = !!data.pull_request && /^https?:\/\//.test(String(data.pull_request.url));
        pull.hidden = !linkable;
        if (linkable) {
          pull.href = data.pull_request.url;
          pull.rel = "noopener noreferrer";
          setText(pull, "pull request" + (data.pull_request.number ? " #" + data.pull_request.number : ""));
        }
      }
      loadTranscript();
    }

    function poll() {
      api("GET", "/api/v1/tickets/" + encodeURIComponent(ticket))
        .then(function (data) {
          render(data);
          setLive(true, "live · " + new Date().toLocaleTimeString());
        })
        .catch(function (err) {
          if (err.status === 404) {
            var error = document.getElementById("error");
            error.hidden = false;
            setText(error, err.message);
            setLive(true, "unknown ticket");
          } else {
            setLive(false, "disconnected: " + err.message + " — retrying");
          }
        })
        .then(function () {
          setTimeout(poll, TICKET_POLL_MS);
        });
    }
    poll();
  }

  window.__cairnMarkdown = markdown; // the renderer, for the browser test

  function main() {
    if (document.body.dataset.page === "ticket") ticketPage();
    else fleetPage();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
  else main();
})();
