// Users: keyset paging, a search over addresses and names, disable/enable and delete;
// one user's groups and sign-ins; on the user's own page, their passkeys and consents.

import { all, api, names, nameOf, remember } from "./api.js";
import { consentsSection } from "./clients.js";
import { badge, button, confirmButton, field, h, row, section, table, when } from "./dom.js";
import { newestPage } from "./newest.js";
import { passkeysSection } from "./passkeys.js";

const PAGE = 20;
// A search reads the accounts in steps of this many (pages of 500) and filters them
// here: the API filters by exact email only (docs/http/README.md#lists), and every search must stay
// a bounded number of requests however many accounts there are.
const STEP = 2000;

// The accounts whose email or name holds ``text`` (any case), read from after_id
// ``after`` on: at most STEP of them are read. ``next`` is where the next step starts
// (null once every account was read).
async function scan(text, after) {
  const needle = text.toLowerCase();
  const matches = [];
  let read = 0;
  let next = after;
  while (read < STEP && next !== null) {
    const page = await api("GET", "/v1/internal/users", { query: { limit: 500, after_id: next } });
    read += page.users.length;
    matches.push(...page.users.filter((user) => user.email.includes(needle) || user.name.toLowerCase().includes(needle)));
    next = page.next_after_id === undefined ? null : page.next_after_id;
  }
  return { matches, read, next };
}

// A whole address is also asked of the API (its exact filter): that account is found
// however far down the list it is. A partial one ("bob@") is no address: nothing to ask.
async function exact(text) {
  if (!/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(text)) return null;
  try {
    const page = await api("GET", "/v1/internal/users", { query: { email: text, limit: 1 } });
    return page.users[0] || null;
  } catch (failure) {
    if (failure.status === 400) return null;
    throw failure;
  }
}

export async function usersScreen(ctx) {
  const view = h("div", {});
  const email = h("input", { type: "search", name: "email", autocomplete: "off", placeholder: "bob, @example.com or a name" });
  const found = h("p", { class: "found muted", id: "users-found", "aria-live": "polite" });
  const list = h("div", { id: "users-list" });
  const pager = h("div", { class: "pager" });
  const trail = [0]; // after_id of each page shown so far: Previous pops it
  // A search's state: what was asked, the accounts found so far and where reading stopped.
  let search = null;
  let asked = ""; // the words of the last search sent (not what the field holds meanwhile)

  function show(users) {
    remember(users, "email");
    list.replaceChildren(table(["Name", "Email", "Status", "Actions"], users.map((user) => userRow(ctx, user, load)), "Users"));
  }

  // An answer that failed leaves nothing stale behind it: no list, no pager.
  function failed(failure) {
    found.replaceChildren();
    list.replaceChildren();
    pager.replaceChildren();
    ctx.fail(failure);
  }

  async function browse() {
    const page = await api("GET", "/v1/internal/users", { query: { limit: PAGE, after_id: trail[trail.length - 1] } });
    found.replaceChildren();
    show(page.users);
    pager.replaceChildren(
      button("Previous", () => { trail.pop(); load(); }, { disabled: trail.length < 2 }),
      h("span", { class: "muted", text: `Page ${trail.length}` }),
      button("Next", () => { trail.push(page.next_after_id); load(); }, { disabled: page.next_after_id === null }));
  }

  // Ask again (a new search, or a redraw after a change: then the page shown stays).
  async function searchFor(text, keepPage) {
    const [one, step] = await Promise.all([exact(text), scan(text, 0)]);
    const matches = one && !step.matches.some((user) => user.uuid === one.uuid) ? [one, ...step.matches] : step.matches;
    const page = keepPage && search && search.text === text ? search.page : 0;
    search = { text, matches, read: step.read, next: step.next, page };
    drawSearch();
  }

  // Draw the search's current page from what was read (paging reads nothing more).
  function drawSearch() {
    const { text, matches } = search;
    const pages = Math.max(1, Math.ceil(matches.length / PAGE));
    search.page = Math.min(Math.max(0, search.page), pages - 1);
    const { page } = search;
    show(matches.slice(page * PAGE, (page + 1) * PAGE));
    const whole = search.next === null;
    found.replaceChildren(`${matches.length} ${matches.length === 1 ? "account matches" : "accounts match"} “${text}”`
      + (whole ? " (every account was searched)." : ` in the first ${search.read} accounts read; more are left to search.`));
    pager.replaceChildren(
      button("Previous", () => { search.page -= 1; drawSearch(); }, { disabled: page < 1 }),
      h("span", { class: "muted", text: `Page ${page + 1} of ${pages}` }),
      button("Next", () => { search.page += 1; drawSearch(); }, { disabled: page + 1 >= pages }),
      whole ? null : button(`Search the next ${STEP}`, async () => {
        try {
          const more = await scan(text, search.next);
          const seen = new Set(search.matches.map((user) => user.uuid));
          search.matches.push(...more.matches.filter((user) => !seen.has(user.uuid)));
          search.read += more.read;
          search.next = more.next;
          drawSearch();
        } catch (failure) { failed(failure); }
      }, { id: "users-more" }));
  }

  // ``keepPage``: a redraw after a change (disable, delete) stays on the page it was on.
  async function load(keepPage = true) {
    const text = asked;
    try {
      if (text) await searchFor(text, keepPage);
      else { search = null; await browse(); }
    } catch (failure) { failed(failure); }
  }

  email.setAttribute("aria-describedby", "user-search-hint");
  const form = h("form", { role: "search", id: "user-search" },
    h("div", { class: "inline" }, field("Email", email), h("button", { type: "submit", text: "Search" }),
      button("Clear", () => { email.value = ""; asked = ""; trail.splice(1); load(false); })),
    h("small", { class: "hint", id: "user-search-hint", text: "Any part of an address or a name, in any case." }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    asked = email.value.trim().toLowerCase();
    trail.splice(1);
    load(false);
  });
  view.append(form, found, list, pager);
  await load(false);
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
  return row(user.name, user.email, status(ctx, user, me), actions);
}

// Whether an account has a second factor, and whether its address is proven, is its
// security posture: shown to those who manage accounts (the policy's users × update,
// admins in the shipped policy) and to each user about their own account, not to every
// signed-in user about everyone (docs/console.md says why).
function status(ctx, user, me) {
  const posture = me || ctx.can("users:update");
  return h("span", { class: "badges" },
    user.disabled ? badge("disabled", "bad") : badge("active", "good"),
    posture ? (user.email_verified ? badge("verified") : badge("unverified", "warn")) : null,
    posture && user.mfa_enabled ? badge("MFA") : null, me ? badge("you") : null);
}

// An account's facts as its pages show them (this screen and My account): its name,
// the ``more`` rows ([term, text]), its status, uuid and registration.
export function facts(ctx, user, more = []) {
  return h("dl", { class: "facts" },
    h("dt", { text: "Name" }), h("dd", { text: user.name }),
    ...more.flatMap(([term, text]) => [h("dt", { text: term }), h("dd", { text })]),
    h("dt", { text: "Status" }), h("dd", {}, status(ctx, user, user.uuid === ctx.session.me.uuid)),
    h("dt", { text: "UUID" }), h("dd", {}, h("code", { text: user.uuid })),
    h("dt", { text: "Registered" }), h("dd", { text: when(user.created_at) }));
}

export async function userScreen(ctx, id) {
  const user = await api("GET", `/v1/internal/users/${id}`);
  names.set(user.uuid, user.email);
  const view = h("div", {},
    h("p", {}, h("a", { href: "#/users", text: "← All users" })),
    section(user.email, facts(ctx, user)));

  const memberships = await all("/v1/internal/members", "members", { user_uuid: user.uuid }, 500);
  const groups = memberships.length ? remember(await all("/v1/internal/groups", "groups"), "name") : [];
  const idOf = new Map(groups.map((group) => [group.uuid, group.id]));
  view.append(section("Groups", table(["Group", "Role", "Since"], memberships.map((member) => row(
    idOf.has(member.group_uuid) ? h("a", { href: `#/groups/${idOf.get(member.group_uuid)}`, text: nameOf(member.group_uuid) })
      : nameOf(member.group_uuid),
    member.role, when(member.created_at))), "Groups of this user")));

  if (user.uuid === ctx.session.me.uuid) {
    const redraw = () => ctx.go(`#/users/${id}`);
    view.append(await passkeysSection(ctx, redraw), await consentsSection(ctx, redraw));
  }

  if (ctx.can("audit:read")) {
    // The sign-ins are events of the trail; it has no sessions list of its own.
    const since = new Date(Date.now() - 30 * 86400 * 1000).toISOString();
    const query = { event: "login.*", target_uuid: user.uuid, since };
    const page = await newestPage(async (afterId, limit) => {
      const answer = await api("GET", "/v1/internal/audit", { query: { ...query, limit, after_id: afterId } });
      return { items: answer.events, next: answer.next_after_id };
    }, null, 50);
    view.append(section("Sign-ins (last 30 days)", table(["When (UTC)", "Event", "Address"],
      page.items.map((event) => row(when(event.created_at), event.event, event.ip)), "Sign-ins")));
  }
  return view;
}
