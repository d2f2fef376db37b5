// The spends-per-day chart: uPlot over the figures the page carries in
// #spends-data (the table beside it shows the same to a reader without
// JavaScript). Amounts are minor units as strings; the chart shows major units.
(function () {
  'use strict';
  var el = document.getElementById('spends-chart');
  var data = document.getElementById('spends-data');
  if (!el || !data || typeof uPlot === 'undefined') return;
  var digits = Number(el.getAttribute('data-digits') || '2');
  var days = Number(el.getAttribute('data-days') || '14');
  var byDay = {};
  JSON.parse(data.textContent).forEach(function (p) { byDay[p[0]] = Number(p[1]) / Math.pow(10, digits); });
  var xs = [], ys = [];
  var today = new Date();
  var start = Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate()) - (days - 1) * 86400000;
  for (var i = 0; i < days; i++) {
    var t = start + i * 86400000;
    xs.push(t / 1000);
    ys.push(byDay[new Date(t).toISOString().slice(0, 10)] || 0);
  }
  function draw() {
    el.textContent = '';
    var width = Math.max(200, el.clientWidth);
    new uPlot({
      width: width,
      height: 220,
      series: [{}, { label: el.getAttribute('data-currency'), stroke: '#1d4ed8', fill: 'rgba(29,78,216,0.12)', width: 2 }],
      axes: [{}, { size: 70 }],
      legend: { show: false },
      cursor: { show: true },
    }, [xs, ys], el);
  }
  draw();
  var pending;
  window.addEventListener('resize', function () { clearTimeout(pending); pending = setTimeout(draw, 150); });
})();
