// Figures on a narrow screen (a phone, 390 px): what Plotly lays out for a desktop width
// collides there. Titles run past the figure and into the legend, legends below the plot
// cover the x-axis title, slanted category labels overlap. Every page that draws a figure
// passes its layout through deviationsFit(div, layout) and, once drawn, calls
// deviationsUnclash(div) (tests/core/test_phone_browser.py checks every chart's texts for
// overlaps and cuts at 390 px). Above NARROW px a layout is drawn as written.
(function () {
  "use strict";
  const NARROW = 700;
  const TITLE_PX = 14, TITLE_LINE_PX = 18, CHAR_PX = 10;  // a wide capital at 14 px

  // Plotly draws a title on one line: break it at spaces (a long name with none at the
  // width) into lines of at most `chars` characters, joined by Plotly's <br>.
  function wrap(text, chars) {
    const lines = [];
    let line = "";
    for (let word of String(text).split(" ")) {
      while (word.length > chars) {
        if (line) { lines.push(line); line = ""; }
        // Titles hold escaped text (core.text.plotly_text: &#60; and the like): never cut
        // inside an entity.
        let cut = chars;
        const amp = word.lastIndexOf("&", cut - 1);
        if (amp > 0 && word.indexOf(";", amp) >= cut) cut = amp;
        lines.push(word.slice(0, cut));
        word = word.slice(cut);
      }
      if (line && line.length + 1 + word.length > chars) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    }
    if (line) lines.push(line);
    return lines;
  }

  // Plotly's automargin draws a figure, measures its tick labels, then draws it all again
  // with the margin they need (the matrix: 2,900 points drawn twice or three times, 60-70 %
  // of its drawing time). A left margin already wide enough for the y axis' labels leaves
  // automargin nothing to push: they are measured here first, in the font Plotly uses
  // (a canvas), and the margin set to hold them. A label the measure misses is still
  // caught by automargin, at the old cost.
  const PLOTLY_FONT = "\"Open Sans\", verdana, arial, sans-serif";
  const LABEL_GAP = 14;  // Plotly's tick label offset (~10 px) and a little room
  let canvas = null;
  function labelText(text) {
    // Ticktext is Plotly's pseudo-HTML, escaped (core.text.plotly_text): tags out,
    // entities back to the characters they stand for, never parsed as markup here.
    return String(text).replace(/<[^>]*>/g, "").replace(/&#(\d+);/g, function (_, n) {
      return String.fromCodePoint(Number(n));
    }).replace(/&#x([0-9a-f]+);/gi, function (_, n) {
      return String.fromCodePoint(parseInt(n, 16));
    }).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, "\"")
      .replace(/&amp;/g, "&");
  }
  function labelRoom(layout, axis) {
    if (!axis || axis.automargin !== true || axis.side === "right" || axis.visible === false
        || axis.tickmode !== "array" || !Array.isArray(axis.ticktext) || !axis.ticktext.length) {
      return 0;
    }
    canvas = canvas || document.createElement("canvas");
    const context = canvas.getContext("2d");
    const font = Object.assign({}, layout.font, axis.tickfont);
    context.font = (font.size || 12) + "px " + (font.family || PLOTLY_FONT);
    let widest = 0;
    for (const text of axis.ticktext) {
      widest = Math.max(widest, context.measureText(labelText(text)).width);
    }
    return Math.ceil(widest) + LABEL_GAP;
  }
  function roomForLabels(width, layout) {
    const room = Math.min(labelRoom(layout, layout.yaxis), Math.floor(width / 2));
    const margin = layout.margin || {};
    if (!room || room <= (margin.l === undefined ? 80 : margin.l)) return layout;
    return Object.assign({}, layout, {margin: Object.assign({}, margin, {l: room})});
  }

  window.deviationsFit = function (div, layout) {
    const width = div.clientWidth || window.innerWidth;
    if (layout && width >= NARROW) return roomForLabels(width, layout);
    if (width >= NARROW || !layout) return layout;
    const out = structuredClone(layout);
    const margin = out.margin = Object.assign({l: 60, r: 20, t: 40, b: 40}, out.margin);
    const plotWidth = Math.max(100, width - margin.l - margin.r);
    let top = 6;
    const title = out.title && (typeof out.title === "string" ? {text: out.title} : out.title);
    if (title && title.text) {
      const lines = wrap(title.text, Math.floor((width - 16) / CHAR_PX));
      out.title = Object.assign({}, title, {
        text: lines.join("<br>"), x: 0, xanchor: "left", xref: "container",
        y: 1, yanchor: "top", yref: "container", pad: {t: 6, l: 8},
        font: Object.assign({}, title.font, {size: TITLE_PX})});
      top += lines.length * TITLE_LINE_PX + 4;
    }
    if (out.showlegend !== false && out.legend) {
      // Above the plot, left-aligned, under the title: deviationsUnclash moves the plot
      // down if the legend needs more rows than this room.
      out.legend = Object.assign({}, out.legend, {
        orientation: "h", x: 0, xanchor: "left", y: 1, yanchor: "bottom",
        font: Object.assign({}, out.legend.font, {size: 11})});
      top += 24;
    }
    // The plot keeps its height: the figure grows by what the title and legend took.
    const grown = Math.max(0, top - margin.t);
    margin.t += grown;
    out.height = (layout.height || 450) + grown;
    const most = Math.max(2, Math.floor(plotWidth / 16));
    for (const [key, axis] of Object.entries(out)) {
      if (!/^xaxis[0-9]*$/.test(key) || !axis) continue;
      // Category labels (releases, build ids) stand upright, one every 16 px at most;
      // numbers keep their own labels, at most one every 45 px. Labels stand 8 px off the
      // axis, clear of the y axis' lowest label at the corner.
      axis.ticklabelstandoff = 8;
      if (axis.tickmode === "array" && Array.isArray(axis.tickvals)) {
        const step = Math.ceil(axis.tickvals.length / most);
        const keep = function (_, i) { return i % step === 0; };
        axis.tickvals = axis.tickvals.filter(keep);
        if (Array.isArray(axis.ticktext)) axis.ticktext = axis.ticktext.filter(keep);
        axis.tickangle = -90;
      } else if (axis.type === "category") {
        axis.tickangle = -90;
        axis.nticks = most;
      } else {
        axis.nticks = Math.max(2, Math.floor(plotWidth / 45));
      }
      axis.automargin = true;
    }
    return out;
  };

  function overlap(a, b) {
    return !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top);
  }

  // After the first draw, measured: a title of several lines that Plotly placed partly
  // above the figure comes down inside it, and if the legend then meets the title (more
  // legend rows than planned) the plot and its legend move down by the overlap.
  window.deviationsUnclash = function (div) {
    const full = div._fullLayout;
    // The width Plotly drew at: reading the div's would lay out the page again first
    // (70 ms after the matrix's 2,900 points).
    if (!full || (full.width || div.clientWidth || window.innerWidth) >= NARROW) return;
    const title = div.querySelector(".g-gtitle text");
    if (!title) return;
    const box = div.getBoundingClientRect();
    const a = title.getBoundingClientRect();
    const down = Math.max(0, Math.ceil(box.top - a.top) + 2);
    const moved = {top: a.top + down, bottom: a.bottom + down, left: a.left, right: a.right};
    const legend = div.querySelector(".legend");
    const b = legend && legend.getBoundingClientRect();
    const clash = b && overlap(moved, b) ? Math.ceil(moved.bottom - b.top) + 4 : 0;
    if (!down && !clash) return;
    const update = {"title.pad.t": ((full.title.pad && full.title.pad.t) || 0) + down};
    if (clash) {
      update["margin.t"] = full.margin.t + clash;
      update.height = full.height + clash;
    }
    return Plotly.relayout(div, update);
  };
})();
