// The audit trail with its filters (docs/http/audit.md): newest first by default (or oldest
// first), keyset paged; every time shown or typed is UTC.

import { api, ApiError, findUser, nameOf } from "./api.js";
import { button, field, h, row, table, when } from "./dom.js";
import { newestPage } from "./newest.js";

const PAGE = 50;

// A datetime-local value ("2026-11-24T08:00" or with seconds) read as UTC, the zone of
// every time the console shows; the browser's own zone plays no part.
export function utc(value) {
  if (!value) return undefined;
  const date = new Date(`${value.length === 16 ? `${value}:00` : value}Z`);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

// Who acted. No actor: an operator's command (it runs outside any request; grant-admin
// and revoke-admin also say "via": "command line"), or someone not signed in (a failed
// login, a reset asked for).
export function actorOf(item) {
  if (item.actor_uuid) return nameOf(item.actor_uuid);
  const details = item.details || {};
  if (details.via === "command line" || !item.request_id) return "operator (command line)";
  return "not signed in";
}

// The service's 400 about a filter, in the console's words (it points at the API).
function filterProblem(failure) {
  if (!(failure instanceof ApiError) || failure.status !== 400 || !failure.body) return failure;
  const body = failure.body;
  const parts = [];
  if (typeof body.event === "string") {
    const name = /^No event is called (\S+?):/.exec(body.event);
    parts.push(name ? `No event is called ${name[1]}: give a full name such as user.disabled, a prefix such as user.*, or leave Event empty.`
      : `Event: ${body.event.replace(/:\s*see GET \S+.*$/, ".")}`);
  }
  if (typeof body.target_uuid === "string") parts.push(`Target: ${body.target_uuid}`);
  if (typeof body.since === "string" || typeof body.until === "string") parts.push("Since and Until take a date and a time (UTC).");
  return parts.length ? new ApiError(400, body, parts.join(" ")) : failure;
}

export async function auditScreen(ctx) {
  const event = h("input", { type: "text", name: "event", placeholder: "group.* or user.disabled", autocomplete: "off" });
  const actor = h("input", { type: "text", name: "actor", placeholder: "email or uuid", autocomplete: "off" });
  const target = h("input", { type: "text", name: "target", placeholder: "uuid", autocomplete: "off" });
  const since = h("input", { type: "datetime-local", name: "since", step: 1, "aria-describedby": "audit-utc" });
  const until = h("input", { type: "datetime-local", name: "until", step: 1, "aria-describedby": "audit-utc" });
  const order = h("select", { name: "order" },
    h("option", { value: "newest", text: "Newest first", selected: true }), h("option", { value: "oldest", text: "Oldest first" }));
  const list = h("div", { id: "audit-list" });
  const pager = h("div", { class: "pager" });
  // Oldest first: the after_id of each page shown. Newest first: the ``before`` of each.
  const trail = [0];

  // Nothing stale stays under a failure: the list and its pager go with it.
  function failed(failure) {
    list.replaceChildren();
    pager.replaceChildren();
    if (typeof failure === "string") ctx.notice(failure, "error");
    else ctx.fail(filterProblem(failure));
  }

  async function load() {
    try {
      const query = { event: event.value.trim() || undefined, target_uuid: target.value.trim() || undefined,
        since: utc(since.value), until: utc(until.value) };
      if (actor.value.trim()) {
        const who = await findUser(actor.value);
        if (!who) { failed(`No user has the email ${actor.value.trim()}.`); return; }
        query.actor_uuid = who.uuid;
      }
      let items;
      let next;
      if (order.value === "oldest") {
        const page = await api("GET", "/v1/internal/audit", { query: { ...query, limit: PAGE, after_id: trail[trail.length - 1] } });
        items = page.events;
        next = page.next_after_id;
      } else {
        const read = async (afterId, limit) => {
          const page = await api("GET", "/v1/internal/audit", { query: { ...query, limit, after_id: afterId } });
          return { items: page.events, next: page.next_after_id };
        };
        const page = await newestPage(read, trail[trail.length - 1], PAGE);
        items = page.items;
        next = page.older;
      }
      list.replaceChildren(table(["When (UTC)", "Event", "Actor", "Target", "Address", "Details"], items.map((item) => row(
        when(item.created_at), h("code", { text: item.event }), actorOf(item),
        item.target_type ? `${item.target_type} ${nameOf(item.target_uuid)}` : "", item.ip,
        h("code", { class: "details", text: JSON.stringify(item.details) }))), "Audit events"));
      const [back, on] = order.value === "oldest" ? ["Previous", "Next"] : ["Newer", "Older"];
      pager.replaceChildren(
        button(back, () => { trail.pop(); load(); }, { disabled: trail.length < 2 }),
        h("span", { class: "muted", text: `Page ${trail.length}` }),
        button(on, () => { trail.push(next); load(); }, { disabled: next === null || next === undefined }));
    } catch (failure) { failed(failure); }
  }

  // A new order or new filters start again from the first page.
  const restart = () => { trail.splice(0, trail.length, order.value === "oldest" ? 0 : null); load(); };
  trail[0] = null;
  order.addEventListener("change", restart);
  const form = h("form", { id: "audit-filters" }, h("div", { class: "inline" },
    field("Event", event), field("Actor", actor), field("Target uuid", target),
    field("Since (UTC)", since), field("Until (UTC)", until), field("Order", order)),
    h("small", { class: "hint", id: "audit-utc", text: "Since and Until are UTC, like every time listed below." }),
    h("p", { class: "actions" }, h("button", { type: "submit", class: "primary", text: "Apply filters" }),
      button("Reset", () => { form.reset(); restart(); })));
  form.addEventListener("submit", (e) => { e.preventDefault(); restart(); });
  await load();
  return h("div", {}, form, list, pager);
}
