// Draw every Plotly figure of the page: a <div class="chart" data-figure="ID"> takes its
// figure from the <script type="application/json" id="ID"> that json_script wrote.
// Clicking a point whose customdata[0] is a URL opens it (the matrix links functions).
(function () {
  "use strict";
  for (const div of document.querySelectorAll("div.chart[data-figure]")) {
    const source = document.getElementById(div.dataset.figure);
    if (!source) continue;
    const figure = JSON.parse(source.textContent);
    Plotly.newPlot(div, figure.data, figure.layout, { responsive: true, displaylogo: false })
      .then(function () { div.dataset.rendered = "true"; });
    div.on("plotly_click", function (event) {
      const point = event.points && event.points[0];
      const url = point && Array.isArray(point.customdata) ? point.customdata[0] : null;
      if (typeof url === "string" && url.startsWith("/")) window.location.assign(url);
    });
  }
})();
