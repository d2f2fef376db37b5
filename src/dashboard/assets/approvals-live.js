// Live approvals: the page's [data-approvals-stream] element names the
// server-sent event stream of its organization's approvals (every instance
// serves it). Each change (and each (re)connection, which may have missed
// some) fires `approvals-changed` on the body; the regions that show
// approvals reload themselves on it through htmx (hx-trigger="approvals-changed
// from:body"), and the notice says what changed. Without JavaScript the page
// is the same, only not live.
(function () {
  'use strict';
  var el = document.querySelector('[data-approvals-stream]');
  if (!el || typeof EventSource === 'undefined') return;
  var notice = document.getElementById('notice');
  var source = new EventSource(el.getAttribute('data-approvals-stream'));
  var refresh = function () {
    document.body.dispatchEvent(new CustomEvent('approvals-changed'));
  };
  source.addEventListener('open', refresh);
  source.addEventListener('approval', function (e) {
    var c;
    try {
      c = JSON.parse(e.data);
    } catch (_) {
      return;
    }
    if (notice && c && c.id) {
      notice.classList.remove('error');
      notice.textContent = c.status === 'pending' ? 'A new approval is waiting: ' + c.id + '.' : 'Approval ' + c.id + ' is now ' + c.status + (c.decided_by_email ? ' (by ' + c.decided_by_email + ').' : '.');
    }
    refresh();
  });
  el.setAttribute('data-live', 'connecting');
  source.addEventListener('error', function () {
    el.setAttribute('data-live', 'reconnecting');
  });
  source.addEventListener('open', function () {
    el.setAttribute('data-live', 'connected');
  });
})();
