// The audit trail with its filters (CONTRACT §12): oldest first, keyset paged.

import { api, findUser, nameOf } from "./api.js";
import { button, field, h, row, table, when } from "./dom.js";

const PAGE = 50;

function rfc3339(local) {
  if (!local) return undefined;
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

export async function auditScreen(ctx) {
  const event = h("input", { type: "text", name: "event", placeholder: "group.* or user.disabled", autocomplete: "off" });
  const actor = h("input", { type: "text", name: "actor", placeholder: "email or uuid", autocomplete: "off" });
  const target = h("input", { type: "text", name: "target", placeholder: "uuid", autocomplete: "off" });
  const since = h("input", { type: "datetime-local", name: "since", step: 1 });
  const until = h("input", { type: "datetime-local", name: "until", step: 1 });
  const list = h("div", { id: "audit-list" });
  const pager = h("div", { class: "pager" });
  const trail = [0];

  async function load() {
    try {
      const query = { limit: PAGE, after_id: trail[trail.length - 1], event: event.value.trim() || undefined,
        target_uuid: target.value.trim() || undefined, since: rfc3339(since.value), until: rfc3339(until.value) };
      if (actor.value.trim()) {
        const who = await findUser(actor.value);
        if (!who) { ctx.notice(`No user has the email ${actor.value.trim()}.`, "error"); return; }
        query.actor_uuid = who.uuid;
      }
      const page = await api("GET", "/v1/internal/audit", { query });
      list.replaceChildren(table(["When", "Event", "Actor", "Target", "Address", "Details"], page.events.map((item) => row(
        when(item.created_at), h("code", { text: item.event }), item.actor_uuid ? nameOf(item.actor_uuid) : "anonymous",
        item.target_type ? `${item.target_type} ${nameOf(item.target_uuid)}` : "", item.ip,
        h("code", { class: "details", text: JSON.stringify(item.details) }))), "Audit events"));
      pager.replaceChildren(
        button("Previous", () => { trail.pop(); load(); }, { disabled: trail.length < 2 }),
        h("span", { class: "muted", text: `Page ${trail.length}` }),
        button("Next", () => { trail.push(page.next_after_id); load(); }, { disabled: page.next_after_id === null }));
    } catch (failure) { ctx.fail(failure); }
  }

  const form = h("form", { id: "audit-filters" }, h("div", { class: "inline" },
    field("Event", event), field("Actor", actor), field("Target uuid", target), field("Since", since), field("Until", until)),
    h("p", {}, h("button", { type: "submit", class: "primary", text: "Apply filters" }),
      button("Reset", () => { form.reset(); trail.splice(1); load(); })));
  form.addEventListener("submit", (e) => { e.preventDefault(); trail.splice(1); load(); });
  await load();
  return h("div", {}, form, list, pager);
}
