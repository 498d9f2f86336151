// Upload page: drag and drop several traces, send them with a progress bar, then go to the
// status page. Without JavaScript the form posts normally.
(function () {
  "use strict";
  const form = document.getElementById("upload-form");
  const input = form.querySelector("input[type=file]");
  const zone = document.getElementById("drop-zone");
  const list = document.getElementById("file-list");
  const bar = document.getElementById("upload-progress");
  const barText = document.getElementById("upload-progress-text");
  const errorBox = document.getElementById("upload-error");
  const hint = document.getElementById("series-hint");
  const hintText = hint.textContent;
  let chosen = [];

  // Ask the server about the names before any byte is sent (a typo would otherwise make a
  // new series, and a bad name would be refused only after the whole upload).
  function check() {
    const params = new URLSearchParams();
    for (const field of ["series", "release", "order"]) {
      params.set(field, form.elements[field].value);
    }
    return fetch(form.dataset.checkUrl + "?" + params.toString(), {
      headers: { Accept: "application/json" }, credentials: "same-origin",
    }).then(function (r) { return r.json(); });
  }
  function showHint(result) {
    const name = form.elements.series.value.trim();
    if (result.errors && result.errors.series) {
      hint.textContent = fieldErrors({ series: result.errors.series });
      hint.className = "error";
    } else if (name && result.new_series) {
      hint.textContent = "new series: \u201c" + name + "\u201d will be created";
      hint.className = "warning";
    } else {
      hint.textContent = name ? "existing series" : hintText;
      hint.className = "muted";
    }
  }
  form.elements.series.addEventListener("change", function () {
    check().then(showHint).catch(function () {});
  });

  function showFiles() {
    list.replaceChildren();
    for (const f of chosen) {
      const li = document.createElement("li");
      li.textContent = f.name + " (" + Math.ceil(f.size / 1024) + " KiB)";
      list.appendChild(li);
    }
  }
  input.addEventListener("change", function () {
    chosen = Array.from(input.files);
    showFiles();
  });
  ["dragenter", "dragover"].forEach(function (type) {
    zone.addEventListener(type, function (e) {
      e.preventDefault();
      zone.classList.add("over");
    });
  });
  ["dragleave", "drop"].forEach(function (type) {
    zone.addEventListener(type, function () { zone.classList.remove("over"); });
  });
  zone.addEventListener("drop", function (e) {
    e.preventDefault();
    chosen = chosen.concat(Array.from(e.dataTransfer.files));
    showFiles();
  });

  function fieldErrors(errors) {
    const lines = [];
    for (const [field, items] of Object.entries(errors)) {
      for (const item of items) lines.push((field === "__all__" ? "" : field + ": ") + item.message);
    }
    return lines.join(" ");
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    errorBox.textContent = "";
    barText.textContent = "";
    check().then(function (result) {
      showHint(result);
      const errors = Object.assign({}, result.errors || {});
      if (!chosen.length) errors.files = [{ message: "Choose at least one trace file." }];
      if (Object.keys(errors).length) {
        errorBox.textContent = fieldErrors(errors);
      } else {
        send();
      }
    }).catch(send);  // the server will say it, then
  });

  function send() {
    const data = new FormData(form);
    data.delete("files");
    for (const f of chosen) data.append("files", f, f.name);
    const xhr = new XMLHttpRequest();
    xhr.open("POST", form.action);
    xhr.setRequestHeader("Accept", "application/json");
    bar.hidden = false;
    bar.value = 0;
    xhr.upload.addEventListener("progress", function (ev) {
      if (ev.lengthComputable) {
        bar.value = Math.round((100 * ev.loaded) / ev.total);
        barText.textContent = bar.value + "% of " + Math.ceil(ev.total / 1024) + " KiB sent";
      }
    });
    xhr.upload.addEventListener("load", function () {
      barText.textContent = "Sent; the server is registering the runs…";
    });
    xhr.addEventListener("load", function () {
      let body = {};
      try { body = JSON.parse(xhr.responseText); } catch (err) { body = {}; }
      if (xhr.status === 200 && body.status_url) {
        window.location.assign(body.status_url);
      } else {
        bar.hidden = true;
        barText.textContent = "";
        errorBox.textContent = body.errors ? fieldErrors(body.errors)
          : "Upload failed: HTTP " + xhr.status;
      }
    });
    xhr.addEventListener("error", function () {
      bar.hidden = true;
      barText.textContent = "";
      errorBox.textContent = "Upload failed: the server could not be reached.";
    });
    xhr.send(data);
  }
})();
