// The access checker: what the policy decides for a user, and why (docs/http/authorization.md).

import { all, api, findUser, nameOf, remember } from "./api.js";
import { badge, field, h, row, section, table } from "./dom.js";

export async function accessScreen(ctx) {
  const groups = remember(await all("/v1/internal/groups", "groups", {}, 1000), "name");
  const user = h("input", { type: "text", name: "user", required: true, value: ctx.session.me.email, autocomplete: "off" });
  const resource = h("input", { type: "text", name: "resource", required: true, placeholder: "groups" });
  const action = h("input", { type: "text", name: "action", required: true, placeholder: "update" });
  const group = h("select", { name: "group" }, h("option", { value: "", text: "No group (global)" }),
    groups.map((g) => h("option", { value: g.uuid, text: g.name })));
  const result = h("div", { id: "access-result", "aria-live": "polite" });
  const form = h("form", { id: "access-check" }, h("div", { class: "inline" },
    field("User (email or uuid)", user), field("Resource", resource), field("Action", action), field("In group", group)),
    h("p", {}, h("button", { type: "submit", class: "primary", text: "Check access" })));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    result.replaceChildren();
    try {
      const found = await findUser(user.value);
      if (!found) { ctx.notice(`No user has the email ${user.value.trim()}.`, "error"); return; }
      const answer = await api("GET", "/v1/internal/authz/check", { query: {
        user_uuid: found.uuid, resource: resource.value.trim(), action: action.value.trim(),
        group_uuid: group.value || undefined, explain: "true",
      } });
      result.replaceChildren(explanation(answer, `${nameOf(found.uuid)} · ${resource.value.trim()} × ${action.value.trim()}`));
    } catch (failure) { ctx.fail(failure); }
  });
  return h("div", {}, section("Ask the policy", form), result);
}

function explanation(answer, question) {
  return section("Decision",
    h("p", { class: "decision" }, h("span", { text: question }), " ",
      answer.allowed ? badge("Allowed", "good") : badge("Denied", "bad")),
    h("h3", { text: "What allowed it" }),
    answer.allowed ? table(["Role", "Scope", "Group", "Rule"], answer.matched.map((m) =>
      row(m.role, m.scope, nameOf(m.group_uuid), h("code", { text: m.rule }))), "Matched rules")
      : h("p", { text: "Nothing: no rule the user holds allows this." }),
    h("h3", { text: "Roles the user held" }),
    table(["Role", "Scope", "Group"], answer.roles.map((r) => row(r.role, r.scope, nameOf(r.group_uuid))), "Roles held"));
}
