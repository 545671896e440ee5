// The signed-in user's passkeys (docs/http/accounts.md#passkeys), on their own page: the list (name, when
// made, when last used), adding one (named), renaming and removing. Adding and removing
// need a recent authentication (§19): when the service says "Recent authentication
// required" (403), the section asks for the password, confirms it with
// POST /v1/private/users/me/reauth, and does the change again.

import { api, ApiError } from "./api.js";
import { button, confirmButton, field, h, row, section, table, when } from "./dom.js";
import { attestation, ceremonyFailure, supported } from "./webauthn.js";

const RECENT = "Recent authentication required";

const isRecentRefusal = (failure) => failure instanceof ApiError && failure.status === 403
  && failure.body && failure.body.title === RECENT;

// A failed ceremony in words: the browser's refusal, or the service's.
function failureText(failure) {
  return ceremonyFailure(failure) || (failure instanceof ApiError ? failure.message : null);
}

export async function passkeysSection(ctx, redraw) {
  const { passkeys } = await api("GET", "/v1/internal/users/me/passkeys");
  const prompt = h("div", { id: "passkeys-reauth" });

  // Run ``change``; on a 403 for want of a recent authentication, ask for the password,
  // confirm it, and run ``change`` once more. Resolves to whether the change was made.
  async function recent(change) {
    try {
      await change();
      return true;
    } catch (failure) {
      if (!isRecentRefusal(failure)) throw failure;
    }
    const confirmed = await askPassword();
    if (!confirmed) return false;
    await change();
    return true;
  }

  function askPassword() {
    return new Promise((resolve) => {
      const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
      const error = h("div", { "aria-live": "assertive" });
      const form = h("form", { class: "reauth", id: "reauth", novalidate: true },
        h("p", { text: "This change needs a recent sign-in: confirm your password to go on." }),
        field("Your password", password), error,
        h("div", { class: "actions" },
          h("button", { type: "submit", class: "primary", text: "Confirm" }),
          button("Cancel", () => { prompt.replaceChildren(); resolve(false); })));
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        error.replaceChildren();
        try {
          await api("POST", "/v1/private/users/me/reauth", { body: { password: password.value } });
          password.value = "";
          prompt.replaceChildren();
          resolve(true);
        } catch (failure) {
          error.replaceChildren(h("p", { class: "notice error", role: "alert", text: failure.message }));
          password.select();
        }
      });
      prompt.replaceChildren(form);
      password.focus();
    });
  }

  function renameButton(passkey, cell) {
    return button("Rename", () => {
      const input = h("input", { type: "text", name: "passkey-name", value: passkey.name, maxlength: 64,
        "aria-label": `New name for ${passkey.name}` });
      const form = h("form", { class: "inline rename" }, input,
        h("button", { type: "submit", class: "primary", text: "Save" }),
        button("Cancel", () => { cell.replaceChildren(passkey.name); }));
      form.addEventListener("submit", async (event) => {
        event.preventDefault();
        try {
          const renamed = await api("PATCH", `/v1/private/users/me/passkeys/${passkey.id}`, { body: { name: input.value.trim() } });
          ctx.notice(`The passkey is now called ${renamed.name}.`);
          redraw();
        } catch (failure) { ctx.fail(failure); input.focus(); }
      });
      cell.replaceChildren(form);
      input.select();
    }, { "aria-label": `Rename ${passkey.name}` });
  }

  const rows = passkeys.map((passkey) => {
    const cell = h("td", {}, passkey.name);
    return row(cell, when(passkey.created_at), passkey.last_used_at ? when(passkey.last_used_at) : "never",
      h("div", { class: "actions" }, renameButton(passkey, cell),
        confirmButton("Remove", `Remove ${passkey.name}? It cannot sign you in any more.`, async () => {
          try {
            if (await recent(() => api("DELETE", `/v1/private/users/me/passkeys/${passkey.id}`))) {
              ctx.notice(`${passkey.name} is removed.`);
              redraw();
            }
          } catch (failure) { ctx.fail(failure); }
        }, { "aria-label": `Remove ${passkey.name}` })));
  });

  let adder;
  if (supported()) {
    const name = h("input", { type: "text", name: "passkey-name", maxlength: 64, placeholder: "e.g. Work laptop" });
    adder = h("form", { id: "passkey-add", class: "inline" }, field("Passkey name", name),
      h("button", { type: "submit", class: "primary", text: "Add a passkey" }));
    adder.addEventListener("submit", async (event) => {
      event.preventDefault();
      const submit = adder.querySelector("button[type=submit]");
      submit.disabled = true;
      try {
        let made = null;
        const added = await recent(async () => {
          const options = await api("POST", "/v1/private/users/me/passkeys/options");
          const credential = await attestation(options);
          const label = name.value.trim();
          made = await api("POST", "/v1/private/users/me/passkeys", { body: { credential, ...(label ? { name: label } : {}) } });
        });
        if (added) {
          ctx.notice(`${made.name} is added: it signs you in without a password.`);
          redraw();
        }
      } catch (failure) {
        const said = failureText(failure);
        if (said) ctx.notice(said, "error"); else ctx.fail(failure);
      } finally {
        submit.disabled = false;
      }
    });
  } else {
    adder = h("p", { class: "muted", text: "This browser cannot make passkeys (no WebAuthn); use another to add one." });
  }

  return section("Passkeys",
    h("p", { class: "muted", text: "Passkeys sign you in without a password, with this device's lock (a fingerprint, a face, a PIN)." }),
    table(["Name", "Added (UTC)", "Last used (UTC)", "Actions"], rows, "Your passkeys"), prompt, adder);
}
