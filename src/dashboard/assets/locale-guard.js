// uPlot builds its number format from navigator.language when it loads; a
// browser started under LANG=C reports a tag Intl refuses ("en-US@posix"),
// which would stop the chart from ever drawing. Such a tag is replaced by its
// language part before uPlot loads; a valid one is left alone.
(function () {
  'use strict';
  try {
    new Intl.NumberFormat(navigator.language);
  } catch (e) {
    var lang = String(navigator.language || '').split('@')[0];
    try { new Intl.NumberFormat(lang); } catch (e2) { lang = 'en-US'; }
    Object.defineProperty(navigator, 'language', { value: lang, configurable: true });
  }
})();
