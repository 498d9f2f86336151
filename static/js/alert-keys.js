// Keyboard shortcuts of the alerts page (rows are groups) and a group page (rows are
// alerts): j/k move the cursor, x selects the row, a acknowledges and i invalidates the
// selected rows (the row at the cursor when none is selected) through the group's triage
// form (POST /alerts/groups/<id>/triage/), ? shows the help, Esc closes it.
// A static file: no inline script, so a Content-Security-Policy without 'unsafe-inline'
// keeps it working.
(() => {
  "use strict";
  const table = document.querySelector("table[data-keys]");
  const help = document.getElementById("keys-help");
  const status = document.getElementById("keys-status");
  if (!table || !help) return;
  const perGroup = table.dataset.keys === "groups";
  const canTriage = table.hasAttribute("data-can-triage");
  const rows = () => Array.from(table.querySelectorAll(
    perGroup ? "tbody tr[data-group]" : "tbody tr[data-alert]"));
  const box = (row) => row.querySelector(perGroup ? "input.row-select" : "input[name=alert]");
  const csrf = () => document.querySelector("input[name=csrfmiddlewaretoken]")?.value || "";
  let cursor = -1;

  function say(text) {
    if (status) status.textContent = text;
  }

  function moveTo(index) {
    const all = rows();
    if (!all.length) return;
    const next = Math.max(0, Math.min(all.length - 1, index));
    if (cursor >= 0 && all[cursor]) {
      all[cursor].classList.remove("key-cursor");
      all[cursor].removeAttribute("aria-current");
    }
    cursor = next;
    const row = all[cursor];
    row.classList.add("key-cursor");
    row.setAttribute("aria-current", "true");
    row.tabIndex = -1;
    row.focus({ preventScroll: true });
    row.scrollIntoView({ block: "nearest" });
  }

  function toggle() {
    const row = rows()[cursor];
    const input = row && box(row);
    if (input) input.checked = !input.checked;
  }

  // Each request is one group's triage form: {url, alerts}.
  function requests() {
    const all = rows();
    let chosen = all.filter((row) => box(row)?.checked);
    if (!chosen.length && cursor >= 0) chosen = [all[cursor]];
    if (perGroup) {
      return chosen.map((row) => ({
        url: row.dataset.triage,
        alerts: (row.dataset.alerts || "").split(",").filter(Boolean),
      }));
    }
    return [{ url: table.dataset.triage, alerts: chosen.map((row) => row.dataset.alert) }];
  }

  async function setStatus(value, label) {
    if (!canTriage) {
      say("Log in to triage.");
      return;
    }
    const todo = requests().filter((r) => r.alerts.length);
    if (!todo.length) {
      say("Move to a row with j or k first (or select rows with x).");
      return;
    }
    say(`Marking ${label}…`);
    for (const r of todo) {
      const body = new URLSearchParams();
      body.append("csrfmiddlewaretoken", csrf());
      body.append("status", value);
      for (const id of r.alerts) body.append("alert", id);
      let response;
      try {
        response = await fetch(r.url, {
          method: "POST", body, credentials: "same-origin",
          headers: { "X-CSRFToken": csrf() },
        });
      } catch (error) {
        say(`Not applied: ${error}`);
        return;
      }
      if (!response.ok) {
        const page = new DOMParser().parseFromString(await response.text(), "text/html");
        const reason = page.getElementById("triage-error")?.textContent
          || `the server answered ${response.status}`;
        say(reason.startsWith("Not applied") ? reason : `Not applied: ${reason}`);
        return;
      }
    }
    window.location.reload();
  }

  function showHelp(show) {
    help.hidden = !show;
    if (show) document.getElementById("keys-help-close")?.focus();
  }

  document.getElementById("keys-help-close")?.addEventListener("click", () => showHelp(false));

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    const target = event.target;
    const typing = target instanceof HTMLElement && (
      target.isContentEditable || target instanceof HTMLTextAreaElement
      || target instanceof HTMLSelectElement
      || (target instanceof HTMLInputElement
          && !["checkbox", "radio", "button", "submit", "reset"].includes(target.type)));
    if (typing) return;
    if (event.key === "Escape") {
      if (!help.hidden) {
        showHelp(false);
        event.preventDefault();
      }
      return;
    }
    if (event.key === "?") {
      showHelp(help.hidden);
      event.preventDefault();
      return;
    }
    if (!help.hidden) return;
    const actions = {
      j: () => moveTo(cursor + 1),
      k: () => moveTo(cursor < 0 ? 0 : cursor - 1),
      x: toggle,
      a: () => setStatus("acknowledged", "acknowledged"),
      i: () => setStatus("invalid", "invalid"),
    };
    const action = actions[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });
})();
