// Tables with class "sortable": a click on a header sorts the rows by that column, again to
// reverse. A cell's data-sort (a number) is used when present, else its text.
(function () {
  "use strict";
  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, column) {
      th.style.cursor = "pointer";
      th.title = "sort";
      th.addEventListener("click", function () {
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        const up = th.dataset.order !== "asc";
        heads.forEach(function (h) { delete h.dataset.order; });
        th.dataset.order = up ? "asc" : "desc";
        function key(row) {
          const cell = row.cells[column];
          const n = cell && cell.dataset.sort;
          return n !== undefined && n !== "" ? parseFloat(n) : (cell ? cell.textContent : "");
        }
        rows.sort(function (a, b) {
          const x = key(a), y = key(b);
          const c = typeof x === "number" && typeof y === "number" ? x - y
            : String(x).localeCompare(String(y));
          return up ? c : -c;
        });
        for (const row of rows) body.appendChild(row);
      });
    });
  }
})();
