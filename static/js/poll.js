// Status pages: poll the API until every run is done or failed. Text only (textContent):
// file names and errors come from uploads.
(function () {
  "use strict";
  const FINAL = new Set(["done", "failed"]);

  function cell(text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    return td;
  }

  function linkCell(text, href) {
    const td = document.createElement("td");
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    td.appendChild(a);
    return td;
  }

  function renderBatch(table, runs) {
    const body = table.querySelector("tbody");
    body.replaceChildren();
    const counts = { pending: 0, done: 0, failed: 0 };
    for (const run of runs) {
      counts[run.status] = (counts[run.status] || 0) + 1;
      const tr = document.createElement("tr");
      tr.dataset.status = run.status;
      const name = document.createElement("td");
      const link = document.createElement("a");
      link.href = run.page_url;
      link.textContent = run.file_name;
      name.appendChild(link);
      if (run.duplicate) name.appendChild(document.createTextNode(" (already ingested)"));
      const seriesUrl = "/series/" + encodeURIComponent(run.series) + "/";
      tr.append(name, linkCell(run.series, seriesUrl),
                linkCell(run.release, seriesUrl + "releases/" + encodeURIComponent(run.release) + "/"),
                cell(run.status, "status status-" + run.status), cell(run.error, "error"));
      body.appendChild(tr);
    }
    const summary = document.getElementById("batch-summary");
    summary.textContent =
      runs.length + " file(s): " + counts.done + " done, " + counts.failed + " failed, " +
      counts.pending + " pending";
    const finished = runs.every(function (r) { return FINAL.has(r.status); });
    if (finished && runs.length) {
      const results = document.createElement("a");
      results.id = "batch-results";
      results.href = "/series/" + encodeURIComponent(runs[0].series) + "/";
      results.textContent = "See the results: the deviation matrix of " + runs[0].series;
      summary.append(". ", results);
    }
    return finished;
  }

  function renderRun(run) {
    const status = document.getElementById("run-status");
    // A run that ends while the page is open: the server renders its summary and error.
    if (FINAL.has(run.status) && !FINAL.has(status.dataset.initial)) {
      window.location.reload();
      return true;
    }
    status.textContent = run.status;
    status.className = "status status-" + run.status;
    return FINAL.has(run.status);
  }

  function poll(url, render, delay) {
    fetch(url, { headers: { Accept: "application/json" } })
      .then(function (r) { return r.json(); })
      .then(function (data) {
        if (!render(data)) setTimeout(function () { poll(url, render, Math.min(delay * 1.5, 5000)); }, delay);
      })
      .catch(function () { setTimeout(function () { poll(url, render, 5000); }, 5000); });
  }

  const batch = document.getElementById("batch");
  if (batch) poll(batch.dataset.statusUrl, function (runs) { return renderBatch(batch, runs); }, 500);
  const run = document.getElementById("run");
  if (run) poll(run.dataset.statusUrl, renderRun, 500);
})();
