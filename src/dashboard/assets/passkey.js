// Passkeys in the browser, through @simplewebauthn/browser (its bundle,
// served beside this file): add one on the account page, sign in with one on
// the sign-in page. Without JavaScript or WebAuthn both stay hidden and the
// code sign-in works as before.
(function () {
  'use strict';
  var W = window.SimpleWebAuthnBrowser;
  if (!W || !window.PublicKeyCredential) return;
  var meta = document.querySelector('meta[name="csrf-token"]');
  function post(url, body) {
    return fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': meta ? meta.getAttribute('content') : '' },
      body: JSON.stringify(body),
    }).then(function (r) {
      return r.json().then(function (j) { return { ok: r.ok, body: j }; });
    });
  }
  function say(text) {
    var n = document.getElementById('notice');
    if (!n) return;
    n.textContent = text;
    n.className = 'notice error';
  }
  function failed(err) {
    say(err && err.name === 'NotAllowedError' ? 'The passkey was not used: nothing changed. Try again, or sign in with a code.' : 'The passkey did not work: ' + (err && err.message ? err.message : 'try again') + '.');
  }

  var add = document.getElementById('add-passkey');
  if (add) {
    document.getElementById('passkey-add-area').hidden = false;
    add.addEventListener('click', function () {
      var name = document.getElementById('passkey-name').value;
      post('/dashboard/passkeys/options', {}).then(function (o) {
        if (!o.ok) return say(o.body.error);
        return W.startRegistration({ optionsJSON: o.body.options }).then(function (response) {
          return post('/dashboard/passkeys', { challenge_id: o.body.challenge_id, name: name, response: response });
        }).then(function (v) {
          if (v.ok) location.href = v.body.redirect;
          else say(v.body.error);
        });
      }).catch(failed);
    });
  }

  var signIn = document.getElementById('passkey-sign-in');
  if (signIn) {
    document.getElementById('passkey-area').hidden = false;
    signIn.addEventListener('click', function () {
      post('/dashboard/sign-in/passkey/options', {}).then(function (o) {
        if (!o.ok) return say(o.body.error);
        return W.startAuthentication({ optionsJSON: o.body.options }).then(function (response) {
          return post('/dashboard/sign-in/passkey', { challenge_id: o.body.challenge_id, response: response, next: signIn.getAttribute('data-next') });
        }).then(function (v) {
          if (v.ok) location.href = v.body.redirect;
          else say(v.body.error);
        });
      }).catch(failed);
    });
  }
})();
