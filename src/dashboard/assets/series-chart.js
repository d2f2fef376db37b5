// Charts of figures per day with one line per series (Usage, MCP servers):
// uPlot over the JSON block each chart names in data-series-chart
// ({days: ["YYYY-MM-DD", …], digits, series: [{label, values: [integer strings]}]}).
// The table beside each chart shows the same figures to a reader without
// JavaScript. Values are integers (minor or atomic units, or counts); the
// chart shows them divided by 10^digits.
(function () {
  'use strict';
  if (typeof uPlot === 'undefined') return;
  var COLORS = ['#1d4ed8', '#b42318', '#067647', '#93370d', '#6941c6', '#1b1f24'];
  document.querySelectorAll('[data-series-chart]').forEach(function (el) {
    var block = document.getElementById(el.getAttribute('data-series-chart'));
    if (!block) return;
    var d = JSON.parse(block.textContent);
    var scale = Math.pow(10, d.digits || 0);
    var xs = d.days.map(function (day) { return Date.parse(day + 'T00:00:00Z') / 1000; });
    var data = [xs].concat(d.series.map(function (s) { return s.values.map(function (v) { return Number(v) / scale; }); }));
    var series = [{}].concat(d.series.map(function (s, i) { return { label: s.label, stroke: COLORS[i % COLORS.length], width: 2 }; }));
    function draw() {
      el.textContent = '';
      new uPlot({ width: Math.max(200, el.clientWidth), height: 220, series: series, axes: [{}, { size: 70 }], legend: { show: false }, cursor: { show: true } }, data, el);
    }
    draw();
    var pending;
    window.addEventListener('resize', function () { clearTimeout(pending); pending = setTimeout(draw, 150); });
  });
})();
