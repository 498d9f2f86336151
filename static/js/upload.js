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
  let chosen = [];

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
      } else if (body.errors) {
        errorBox.textContent = fieldErrors(body.errors);
      } else {
        errorBox.textContent = "Upload failed: HTTP " + xhr.status;
      }
    });
    xhr.addEventListener("error", function () {
      errorBox.textContent = "Upload failed: the server could not be reached.";
    });
    xhr.send(data);
  });
})();
