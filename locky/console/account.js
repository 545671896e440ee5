// My account: the signed-in user's own account, open to every signed-in user whatever the
// policy lets them do with other accounts (the Users screen needs users × read): their
// name, address and status, their passkeys and the applications they allowed.

import { api, ApiError } from "./api.js";
import { consentsSection } from "./clients.js";
import { h, section } from "./dom.js";
import { passkeysSection } from "./passkeys.js";
import { facts } from "./users.js";

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
    section("Profile", facts(ctx, me, [["Email", me.email]])),
    await guarded("Passkeys", () => passkeysSection(ctx, redraw)),
    await guarded("Applications you allowed", () => consentsSection(ctx, redraw)));
}
