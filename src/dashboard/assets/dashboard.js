// The dashboard's small enhancements (the pages work without them):
// copy buttons, and the CSRF token on every htmx request.
(function () {
  'use strict';
  var token = document.querySelector('meta[name="csrf-token"]');
  document.body.addEventListener('htmx:configRequest', function (e) {
    if (token) e.detail.headers['x-csrf-token'] = token.getAttribute('content');
  });
  // The navigation's links show on a wide screen through CSS (::details-content); a browser without it opens the menu there.
  var menu = document.querySelector('.nav-menu');
  if (menu && window.CSS && !CSS.supports('selector(::details-content)') && window.matchMedia('(min-width: 641px)').matches) menu.open = true;
  document.querySelectorAll('[data-copy]').forEach(function (btn) {
    btn.hidden = false;
    btn.addEventListener('click', function () {
      var target = document.getElementById(btn.getAttribute('data-copy'));
      if (!target || !navigator.clipboard) return;
      navigator.clipboard.writeText(target.textContent.trim()).then(function () {
        var status = document.getElementById('notice');
        if (status) status.textContent = 'Copied to the clipboard.';
        btn.textContent = 'Copied';
      });
    });
  });
})();
