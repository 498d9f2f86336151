// Draw every Plotly figure of the page: a <div class="chart" data-figure="ID"> takes its
// figure from the <script type="application/json" id="ID"> that json_script wrote.
// Clicking a point whose customdata[0] is a URL opens it (the matrix links functions).
(function () {
  "use strict";
  for (const div of document.querySelectorAll("div.chart[data-figure]")) {
    const source = document.getElementById(div.dataset.figure);
    if (!source) continue;
    const figure = JSON.parse(source.textContent);
    // A figure of a given height (the matrix follows its rows) takes exactly that room.
    if (figure.layout.height) div.style.minHeight = figure.layout.height + "px";
    Plotly.newPlot(div, figure.data, deviationsFit(div, figure.layout),
                   { responsive: true, displaylogo: false })
      .then(function () { return deviationsUnclash(div); })
      .then(function () { div.dataset.rendered = "true"; });
    // Tick labels that are links (the matrix's releases): Plotly draws them under its drag
    // layer, where they never see the mouse, so the click is matched to a label here, in
    // the label's own (rotated) coordinates.
    function tickLink(event) {
      for (const text of div.querySelectorAll(".xtick text")) {
        const a = text.querySelector("a");
        const m = a && text.getScreenCTM();
        if (!m) continue;
        const p = new DOMPoint(event.clientX, event.clientY).matrixTransform(m.inverse());
        const b = text.getBBox();
        if (p.x >= b.x && p.x <= b.x + b.width && p.y >= b.y && p.y <= b.y + b.height) {
          return a.href.baseVal;
        }
      }
      return null;
    }
    div.addEventListener("click", function (event) {
      const href = tickLink(event);
      if (href && href.startsWith("/")) window.location.assign(href);
    });
    div.addEventListener("mousemove", function (event) {
      div.style.cursor = tickLink(event) ? "pointer" : "";
    });
    div.on("plotly_click", function (event) {
      const point = event.points && event.points[0];
      let url = point && Array.isArray(point.customdata) ? point.customdata[0] : null;
      if (typeof url !== "string" || !url.startsWith("/")) return;
      // data-click-param="at": the page opened learns the point's x (the matrix: the
      // release whose cell was clicked, highlighted there).
      const param = div.dataset.clickParam;
      if (param && point.x != null) {
        url += (url.includes("?") ? "&" : "?") + param + "=" + encodeURIComponent(point.x);
      }
      window.location.assign(url);
    });
  }
})();
