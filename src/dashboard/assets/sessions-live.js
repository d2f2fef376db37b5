// Live tool calls: the page's [data-calls-stream] element names the
// server-sent event stream of its session's calls (every instance serves it).
// Each call recorded or changed (and each (re)connection, which may have
// missed some) fires `calls-changed` on the body; the region that lists calls
// reloads itself on it through htmx (hx-trigger="calls-changed from:body"),
// and the notice says what changed. Without JavaScript the page is the same,
// only not live.
(function () {
  'use strict';
  var el = document.querySelector('[data-calls-stream]');
  if (!el || typeof EventSource === 'undefined') return;
  var notice = document.getElementById('notice');
  var source = new EventSource(el.getAttribute('data-calls-stream'));
  var refresh = function () {
    document.body.dispatchEvent(new CustomEvent('calls-changed'));
  };
  el.setAttribute('data-live', 'connecting');
  source.addEventListener('open', function () {
    el.setAttribute('data-live', 'connected');
    refresh();
  });
  source.addEventListener('error', function () {
    el.setAttribute('data-live', 'reconnecting');
  });
  source.addEventListener('call', function (e) {
    var c;
    try {
      c = JSON.parse(e.data);
    } catch (_) {
      return;
    }
    if (notice && c && c.id) {
      notice.classList.remove('error');
      notice.textContent = 'Tool call ' + c.id + ' (' + c.tool + '): ' + c.status + '.';
    }
    refresh();
  });
})();
