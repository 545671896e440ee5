// The OpenID provider's sign-in page (docs/http/oauth.md): "Sign in with a passkey".
// The page works without this script (the password form); with it, and a browser that
// has WebAuthn, the hidden passkey form shows. Pressing its button asks Locky for
// sign-in options, lets the browser's authenticator answer them, and posts that answer
// with the form's own hidden fields (the authorization request, the CSRF token) to
// /oauth/authorize/passkey, which signs in and goes on as the password form does.

import { api, ApiError } from "./api.js";
import { assertion, ceremonyFailure, supported } from "./webauthn.js";

const form = document.getElementById("passkey-form");
if (form && supported()) {
  const credential = form.querySelector("input[name=credential]");
  const button = form.querySelector("button");
  const error = document.getElementById("passkey-error");
  const say = (message) => {
    error.textContent = message;
    error.hidden = !message;
  };
  form.hidden = false;
  // Back to this page from the next one (the browser's page cache): an answer already
  // posted is spent, so the next press asks the authenticator again.
  window.addEventListener("pageshow", () => { credential.value = ""; });
  form.addEventListener("submit", async (event) => {
    if (credential.value) return; // the answer is in: post it
    event.preventDefault();
    say("");
    button.disabled = true;
    try {
      const options = await api("POST", "/v1/public/users/login/passkey/options", { anonymous: true, body: {} });
      credential.value = JSON.stringify(await assertion(options));
      form.submit();
    } catch (failure) {
      say(ceremonyFailure(failure) || (failure instanceof ApiError ? `${failure.message} Use your password instead.`
        : "The passkey sign-in did not work; try again or use your password."));
    } finally {
      button.disabled = false;
    }
  });
}
