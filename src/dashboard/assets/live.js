// Live regions: the page's [data-live-stream] element names a server-sent
// event stream (every instance serves it), the event it listens for
// (data-live-event) and the body event it fires (data-live-fires). Each event
// (and each (re)connection, which may have missed some) fires that body event;
// the regions that show the data reload themselves on it through htmx
// (hx-trigger="<event> from:body"), and the notice says what changed. The
// element's data-live says the connection's state. Without JavaScript the page
// is the same, only not live. One script for every live page (approvals, a
// session's tool calls).
(function () {
  'use strict';
  var el = document.querySelector('[data-live-stream]');
  if (!el || typeof EventSource === 'undefined') return;
  // What the notice says about one event's data, by the event's name.
  var say = {
    approval: function (c) {
      return c.status === 'pending' ? 'A new approval is waiting: ' + c.id + '.' : 'Approval ' + c.id + ' is now ' + c.status + (c.decided_by_email ? ' (by ' + c.decided_by_email + ').' : '.');
    },
    call: function (c) {
      return 'Tool call ' + c.id + ' (' + c.tool + '): ' + c.status + '.';
    },
  };
  var name = el.getAttribute('data-live-event');
  var fires = el.getAttribute('data-live-fires');
  var notice = document.getElementById('notice');
  var refresh = function () {
    document.body.dispatchEvent(new CustomEvent(fires));
  };
  // Connected only once htmx has wired the regions (its DOMContentLoaded
  // handler, registered by the deferred htmx.js before this one): a stream
  // that opened earlier fired its refresh at regions not yet listening, and an
  // approval decided between the page's render and the connection stayed unseen.
  var connect = function () {
    var source = new EventSource(el.getAttribute('data-live-stream'));
    el.setAttribute('data-live', 'connecting');
    source.addEventListener('open', function () {
      el.setAttribute('data-live', 'connected');
      refresh();
    });
    source.addEventListener('error', function () {
      el.setAttribute('data-live', 'reconnecting');
    });
    source.addEventListener(name, function (e) {
      var c;
      try {
        c = JSON.parse(e.data);
      } catch (_) {
        return;
      }
      if (notice && c && c.id && say[name]) {
        notice.classList.remove('error');
        notice.textContent = say[name](c);
      }
      refresh();
    });
  };
  if (document.readyState === 'complete') connect();
  else document.addEventListener('DOMContentLoaded', connect);
})();
