// Signing keys (docs/http/tokens.md): the active and retired public keys; admins rotate.

import { api } from "./api.js";
import { badge, confirmButton, h, row, section, table, when } from "./dom.js";

export async function keysScreen(ctx) {
  const { keys } = await api("GET", "/v1/internal/keys");
  const view = h("div", {});
  view.append(section("Keys", table(["Key id", "Algorithm", "Created", "Retired", "State"], keys.map((key) => row(
    h("code", { text: key.kid }), key.alg, when(key.created_at), when(key.retired_at),
    key.retired_at ? badge("retired") : badge("active", "good"))), "Signing keys"),
  h("p", { class: "muted" }, "Applications verify tokens with the public keys at ",
    h("a", { href: "/.well-known/jwks.json", text: "/.well-known/jwks.json" }), ".")));
  if (ctx.can("keys:rotate")) {
    view.append(section("Rotate", h("p", { text: "A new key signs from now on; tokens signed earlier stay valid until they expire." }),
      confirmButton("Rotate signing key", "Make a new active signing key?", async () => {
        try {
          const key = await api("POST", "/v1/private/keys/rotate");
          ctx.notice(`A new key is active: ${key.kid}.`);
          ctx.go("#/keys");
        } catch (failure) { ctx.fail(failure); }
      }, { id: "rotate" })));
  }
  return view;
}
