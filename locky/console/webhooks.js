// Webhooks (admins): subscribe, unsubscribe, and a subscription's deliveries (replay).

import { all, api } from "./api.js";
import { badge, button, confirmButton, field, h, row, section, table, when } from "./dom.js";

export async function webhooksScreen(ctx) {
  const hooks = await all("/v1/internal/webhooks", "webhooks", {}, 500);
  const view = h("div", {});
  const reload = () => ctx.go("#/webhooks");
  if (ctx.can("webhooks:create")) {
    const url = h("input", { type: "url", name: "url", required: true, placeholder: "https://example.com/hooks/locky" });
    const events = h("input", { type: "text", name: "events", required: true, value: "*", autocomplete: "off" });
    const description = h("input", { type: "text", name: "description" });
    const secret = h("div", { id: "webhook-secret", "aria-live": "polite" });
    const form = h("form", { id: "webhook-create" }, h("div", { class: "inline" }, field("URL", url),
      field("Events", events, "Patterns separated by spaces or commas: *, user.*, group.created"), field("Description", description)),
    h("p", {}, h("button", { type: "submit", class: "primary", text: "Add webhook" })), secret);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const made = await api("POST", "/v1/private/webhooks", { body: {
          url: url.value.trim(), events: events.value.split(/[\s,]+/).filter(Boolean), description: description.value,
        } });
        // The secret is shown by the service this once: keep it on screen until the user moves on.
        view.replaceChildren(section("Webhook added",
          h("p", { text: `Deliveries to ${made.url} are signed with this secret. It is shown only now: copy it.` }),
          h("p", {}, h("code", { class: "secret", text: made.secret })),
          h("p", {}, button("Done", reload, { class: "primary" }))));
      } catch (failure) { ctx.fail(failure); }
    });
    view.append(section("Add a webhook", form));
  }
  view.append(section("Webhooks", table(["URL", "Events", "Description", "Created", "Actions"], hooks.map((hook) => {
    const actions = h("div", { class: "actions" }, h("a", { href: `#/webhooks/${hook.id}`, text: "Deliveries",
      "aria-label": `Deliveries to ${hook.url}` }));
    if (ctx.can("webhooks:delete")) {
      actions.append(confirmButton("Delete", `Delete the webhook to ${hook.url}?`, async () => {
        try {
          await api("DELETE", `/v1/private/webhooks/${hook.id}`);
          ctx.notice("The webhook is deleted.");
          reload();
        } catch (failure) { ctx.fail(failure); }
      }, { "aria-label": `Delete the webhook to ${hook.url}` }));
    }
    return row(h("code", { text: hook.url }), hook.events.join(", "), hook.description, when(hook.created_at), actions);
  }), "Webhooks")));
  return view;
}

const STATUS = { succeeded: "good", failed: "bad", pending: "warn" };

export async function deliveriesScreen(ctx, id) {
  const hook = await api("GET", `/v1/internal/webhooks/${id}`);
  const deliveries = await all(`/v1/internal/webhooks/${id}/deliveries`, "deliveries", {}, 1000);
  const replay = ctx.can("webhooks:replay"); // else no Actions column: it would be empty
  const rows = deliveries.reverse().map((item) => row(when(item.created_at), h("code", { text: item.event }),
    badge(item.status, STATUS[item.status] || ""), String(item.attempts),
    item.last_status_code === null ? "" : String(item.last_status_code), item.last_error || "",
    when(item.next_attempt_at),
    ...(replay ? [button("Replay", async () => {
      try {
        await api("POST", `/v1/private/webhooks/${id}/deliveries/${item.id}/replay`);
        ctx.notice("The delivery is queued again.");
        ctx.go(`#/webhooks/${id}`);
      } catch (failure) { ctx.fail(failure); }
    }, { "aria-label": `Replay delivery ${item.id}` })] : [])));
  return h("div", {}, h("p", {}, h("a", { href: "#/webhooks", text: "← All webhooks" })),
    section(`Deliveries to ${hook.url}`, table(["Queued", "Event", "Status", "Attempts", "Last status", "Last error", "Next attempt", ...(replay ? ["Actions"] : [])],
      rows, "Deliveries, newest first")));
}
