// The deliveries-per-hour chart of the webhook pages: uPlot over the figures
// the page carries in #hours-data ([hour ISO, delivered, failed], oldest
// first); the table beside it shows the same to a reader without JavaScript.
(function () {
  'use strict';
  var el = document.getElementById('deliveries-chart');
  var data = document.getElementById('hours-data');
  if (!el || !data || typeof uPlot === 'undefined') return;
  var rows = JSON.parse(data.textContent);
  var xs = [], ok = [], failed = [];
  rows.forEach(function (r) {
    xs.push(Date.parse(r[0]) / 1000);
    ok.push(r[1]);
    failed.push(r[2]);
  });
  function draw() {
    el.textContent = '';
    new uPlot({
      width: Math.max(200, el.clientWidth),
      height: 220,
      series: [
        {},
        { label: 'Delivered', stroke: '#15803d', fill: 'rgba(21,128,61,0.12)', width: 2 },
        { label: 'Failed', stroke: '#b91c1c', width: 2 },
      ],
      axes: [{}, { size: 50 }],
      cursor: { show: true },
    }, [xs, ok, failed], el);
  }
  draw();
  var pending;
  window.addEventListener('resize', function () { clearTimeout(pending); pending = setTimeout(draw, 150); });
})();
