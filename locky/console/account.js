// My account: the signed-in user's own account, open to every signed-in user whatever the
// policy lets them do with other accounts (the Users screen needs users × read): their
// name, address and status, their passkeys and the applications they allowed.

import { api, ApiError } from "./api.js";
import { consentsSection } from "./clients.js";
import { badge, h, section, when } from "./dom.js";
import { passkeysSection } from "./passkeys.js";

// A section drawn by ``draw``; one the policy refuses (403) says so in its place, so the
// rest of the screen still shows.
async function guarded(title, draw) {
  try {
    return await draw();
  } catch (failure) {
    if (!(failure instanceof ApiError) || failure.status !== 403) throw failure;
    return section(title, h("p", { class: "notice info", text: failure.message }));
  }
}

export async function accountScreen(ctx) {
  const me = await api("GET", "/v1/internal/users/me");
  const redraw = () => ctx.go("#/account");
  return h("div", {},
    section("Profile",
      h("dl", { class: "facts" },
        h("dt", { text: "Name" }), h("dd", { text: me.name }),
        h("dt", { text: "Email" }), h("dd", { text: me.email }),
        h("dt", { text: "Status" }), h("dd", {}, h("span", { class: "badges" },
          me.email_verified ? badge("verified") : badge("unverified", "warn"),
          me.mfa_enabled ? badge("MFA") : null)),
        h("dt", { text: "UUID" }), h("dd", {}, h("code", { text: me.uuid })),
        h("dt", { text: "Registered" }), h("dd", { text: when(me.created_at) }))),
    await guarded("Passkeys", () => passkeysSection(ctx, redraw)),
    await guarded("Applications you allowed", () => consentsSection(ctx, redraw)));
}
