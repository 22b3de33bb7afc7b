// The HTML report's inline style and script (no external resource, no network).
#include "html_parts.hpp"

namespace ws1::report {

const std::string_view kHtmlStyle = R"CSS(
:root { --green: #2f9e44; --red: #d62828; --na: #adb5bd; --vacuous: #e8a33d; --ink: #212529; --muted: #6c757d; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink);
       margin: 0 auto; max-width: 1400px; padding: 12px 20px 40px; }
h1 { font-size: 22px; margin: 8px 0; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #dee2e6; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 4px; color: #fff; font-weight: 600; }
.badge.v-green { background: var(--green); } .badge.v-red { background: var(--red); } .badge.v-na { background: var(--na); } .badge.v-vacuous { background: var(--vacuous); }
.muted { color: var(--muted); }
nav a { margin-right: 12px; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid #dee2e6; padding: 3px 6px; vertical-align: top; text-align: left; }
th { background: #f8f9fa; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.heat td { padding: 2px 3px; min-width: 20px; }
table.heat th.col { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 500; font-size: 12px; padding: 4px 2px; }
table.heat th.grp { text-align: center; }
.sq { display: inline-block; width: 13px; height: 13px; margin: 1px; border-radius: 2px; vertical-align: middle; }
.sq.param { border-radius: 50%; }
.v-green.sq, td.s-green { background: var(--green); } .v-red.sq, td.s-red { background: var(--red); }
.v-na.sq, td.s-na { background: var(--na); } .v-vacuous.sq { background: var(--vacuous); }
td.s-green, td.s-red, td.s-na { color: #fff; text-align: center; font-size: 11px; }
body.only-red .sq:not(.v-red) { opacity: .15; }
body.only-red details.cell:not(.v-red) { display: none; }
details.cell { margin: 3px 0; border-left: 4px solid var(--na); padding-left: 8px; }
details.cell.v-green { border-color: var(--green); } details.cell.v-red { border-color: var(--red); }
details.cell > summary { cursor: pointer; }
details.cell:target { outline: 2px solid #4dabf7; }
.chart .axis, .chart .tick { stroke: #868e96; stroke-width: 1; }
.chart .range { fill: #b2f2bb; } .chart .range.bad { fill: #ffc9c9; }
.chart .m-mean { fill: #1c7ed6; } .chart .m-p99 { stroke: #5f3dc4; stroke-width: 2; }
.chart .m-p999 { stroke: #862e9c; stroke-width: 2; } .chart .m-max { fill: #2b8a3e; } .chart .m-max.bad { fill: var(--red); }
.chart .atol { stroke: #000; stroke-width: 1.5; stroke-dasharray: 3 2; }
.chart .allowed { stroke: #f08c00; stroke-width: 1.5; stroke-dasharray: 2 2; }
.chart .lbl { font-size: 9px; fill: #495057; } .chart .lbl.end { text-anchor: end; }
.legend span { margin-right: 14px; }
button { font: inherit; padding: 2px 10px; margin-right: 6px; }
)CSS";

// Counts the squares the browser rendered (the test reads #rendered-counts), adds the
// red-only filter and opens the details a matrix square links to.
const std::string_view kHtmlScript = R"JS(
(function () {
  var squares = document.querySelectorAll('#matrix table.heat a.sq');
  var n = { green: 0, red: 0, na: 0, vacuous: 0 };
  for (var i = 0; i < squares.length; i++) {
    var v = squares[i].getAttribute('data-v');
    if (n.hasOwnProperty(v)) n[v]++;
  }
  var out = document.getElementById('rendered-counts');
  if (out) {
    out.textContent = 'rendered: green ' + n.green + ', red ' + n.red + ', N/A ' + n.na +
                      ', vacuous ' + n.vacuous + ' of ' + squares.length + ' squares';
    out.setAttribute('data-green', n.green);
    out.setAttribute('data-red', n.red);
    out.setAttribute('data-na', n.na);
    out.setAttribute('data-total', squares.length);
    out.setAttribute('data-vacuous', n.vacuous);
  }
  var buttons = document.querySelectorAll('button[data-filter]');
  for (var b = 0; b < buttons.length; b++) {
    buttons[b].hidden = false;
    buttons[b].addEventListener('click', function (ev) {
      document.body.classList.toggle('only-red', ev.target.getAttribute('data-filter') === 'red');
    });
  }
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var el = id && document.getElementById(id);
    if (el && el.tagName === 'DETAILS') el.open = true;
  }
  window.addEventListener('hashchange', openTarget);
  openTarget();
  document.documentElement.setAttribute('data-ws1-ready', '1');
})();
)JS";

}  // namespace ws1::report
