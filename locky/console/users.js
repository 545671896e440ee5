// Users: search by email, keyset paging, disable/enable and delete; one user's groups
// and sign-ins.

import { all, api, names, nameOf, remember } from "./api.js";
import { badge, button, confirmButton, field, h, row, section, table, when } from "./dom.js";

const PAGE = 20;

export async function usersScreen(ctx) {
  const view = h("div", {});
  const email = h("input", { type: "search", name: "email", autocomplete: "off", placeholder: "someone@example.com" });
  const list = h("div", { id: "users-list" });
  const pager = h("div", { class: "pager" });
  const trail = [0]; // after_id of each page shown so far: Previous pops it

  async function load() {
    const query = { limit: PAGE, after_id: trail[trail.length - 1] };
    if (email.value.trim()) query.email = email.value.trim();
    try {
      const page = await api("GET", "/v1/internal/users", { query });
      remember(page.users, "email");
      list.replaceChildren(table(["Name", "Email", "Status", "Actions"], page.users.map((user) => userRow(ctx, user, load)), "Users"));
      pager.replaceChildren(
        button("Previous", () => { trail.pop(); load(); }, { disabled: trail.length < 2 }),
        h("span", { class: "muted", text: `Page ${trail.length}` }),
        button("Next", () => { trail.push(page.next_after_id); load(); }, { disabled: page.next_after_id === null }));
    } catch (failure) { ctx.fail(failure); }
  }

  const search = h("form", { class: "inline", role: "search", id: "user-search" },
    field("Email", email), h("button", { type: "submit", text: "Search" }),
    button("Clear", () => { email.value = ""; trail.splice(1); load(); }));
  search.addEventListener("submit", (event) => { event.preventDefault(); trail.splice(1); load(); });
  view.append(search, list, pager);
  await load();
  return view;
}

function userRow(ctx, user, reload) {
  const me = user.uuid === ctx.session.me.uuid;
  const actions = h("div", { class: "actions" }, h("a", { href: `#/users/${user.id}`, text: "Details", "aria-label": `Details of ${user.email}` }));
  if (ctx.can("users:disable") && !me) {
    const next = !user.disabled;
    actions.append(button(next ? "Disable" : "Enable", async () => {
      try {
        await api("PUT", `/v1/private/users/${user.id}`, { body: { disabled: next } });
        ctx.notice(`${user.email} is ${next ? "disabled" : "enabled"}.`);
        await reload();
      } catch (failure) { ctx.fail(failure); }
    }, { "aria-label": `${next ? "Disable" : "Enable"} ${user.email}` }));
  }
  if (ctx.can("users:delete") && !me) {
    actions.append(confirmButton("Delete", `Delete ${user.email}?`, async () => {
      try {
        await api("DELETE", `/v1/private/users/${user.id}`);
        ctx.notice(`${user.email} is deleted.`);
        await reload();
      } catch (failure) { ctx.fail(failure); }
    }, { "aria-label": `Delete ${user.email}` }));
  }
  return row(user.name, user.email, status(user, me), actions);
}

function status(user, me) {
  return h("span", { class: "badges" },
    user.disabled ? badge("disabled", "bad") : badge("active", "good"),
    user.email_verified ? badge("verified") : badge("unverified", "warn"),
    user.mfa_enabled ? badge("MFA") : null, me ? badge("you") : null);
}

export async function userScreen(ctx, id) {
  const user = await api("GET", `/v1/internal/users/${id}`);
  names.set(user.uuid, user.email);
  const view = h("div", {},
    h("p", {}, h("a", { href: "#/users", text: "← All users" })),
    section(user.email,
      h("dl", { class: "facts" },
        h("dt", { text: "Name" }), h("dd", { text: user.name }),
        h("dt", { text: "Status" }), h("dd", {}, status(user, user.uuid === ctx.session.me.uuid)),
        h("dt", { text: "UUID" }), h("dd", {}, h("code", { text: user.uuid })),
        h("dt", { text: "Registered" }), h("dd", { text: when(user.created_at) }))));

  const memberships = await all("/v1/internal/members", "members", { user_uuid: user.uuid }, 500);
  const groups = memberships.length ? remember(await all("/v1/internal/groups", "groups"), "name") : [];
  const idOf = new Map(groups.map((group) => [group.uuid, group.id]));
  view.append(section("Groups", table(["Group", "Role", "Since"], memberships.map((member) => row(
    idOf.has(member.group_uuid) ? h("a", { href: `#/groups/${idOf.get(member.group_uuid)}`, text: nameOf(member.group_uuid) })
      : nameOf(member.group_uuid),
    member.role, when(member.created_at))), "Groups of this user")));

  if (ctx.can("audit:read")) {
    // The sign-ins are events of the trail; it has no sessions list of its own.
    const since = new Date(Date.now() - 30 * 86400 * 1000).toISOString();
    const page = await api("GET", "/v1/internal/audit", { query: { event: "login.*", target_uuid: user.uuid, since, limit: 50 } });
    view.append(section("Sign-ins (last 30 days)", table(["When", "Event", "Address"],
      page.events.map((event) => row(when(event.created_at), event.event, event.ip)), "Sign-ins")));
  }
  return view;
}
