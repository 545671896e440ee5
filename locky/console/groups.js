// Groups and their members: create a group; in a group, add members with a role the
// policy lets you assign, remove them, rename or delete the group.

import { all, api, ask, findUser, nameOf, remember } from "./api.js";
import { button, confirmButton, field, h, row, section, table, when } from "./dom.js";

const PAGE = 20;
// Never membership roles (docs/http/authorization.md#the-authorization-api).
const NOT_MEMBERSHIP = new Set(["admin", "user"]);

export async function groupsScreen(ctx) {
  const view = h("div", {});
  const list = h("div", { id: "groups-list" });
  const pager = h("div", { class: "pager" });
  const trail = [0];

  async function load() {
    try {
      const page = await api("GET", "/v1/internal/groups", { query: { limit: PAGE, after_id: trail[trail.length - 1] } });
      remember(page.groups, "name");
      list.replaceChildren(table(["Name", "Description", "Created"], page.groups.map((group) => row(
        h("a", { href: `#/groups/${group.id}`, text: group.name }), group.description, when(group.created_at))), "Groups"));
      pager.replaceChildren(
        button("Previous", () => { trail.pop(); load(); }, { disabled: trail.length < 2 }),
        h("span", { class: "muted", text: `Page ${trail.length}` }),
        button("Next", () => { trail.push(page.next_after_id); load(); }, { disabled: page.next_after_id === null }));
    } catch (failure) { ctx.fail(failure); }
  }

  if (ctx.can("groups:create")) {
    const name = h("input", { type: "text", name: "name", required: true, maxlength: 255 });
    const description = h("input", { type: "text", name: "description", maxlength: 1024 });
    const form = h("form", { class: "inline", id: "group-create" }, field("New group name", name),
      field("Description", description), h("button", { type: "submit", class: "primary", text: "Create group" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const group = await api("POST", "/v1/private/groups", { body: { name: name.value.trim(), description: description.value } });
        ctx.notice(`Group ${group.name} is created; you are its owner.`);
        ctx.go(`#/groups/${group.id}`);
      } catch (failure) { ctx.fail(failure); }
    });
    view.append(section("Create a group", form));
  }
  view.append(list, pager);
  await load();
  return view;
}

export async function groupScreen(ctx, id) {
  const group = await api("GET", `/v1/internal/groups/${id}`);
  const [members, roles] = await Promise.all([
    all("/v1/internal/members", "members", { group_uuid: group.uuid }),
    all("/v1/internal/roles", "roles"),
  ]);
  const membershipRoles = roles.filter((role) => !NOT_MEMBERSHIP.has(role.name)).map((role) => role.name);
  // What I may do in this group, in one batch: the group, and assigning each role.
  const can = ctx.can("authz:read") ? await ask(ctx.session.me.uuid, [
    ["groups", "update"], ["groups", "delete"], ["members", "create"], ["members", "delete"],
    ...membershipRoles.map((role) => ["members", `assign:${role}`]),
  ], group.uuid) : {};
  const unknownUsers = members.some((member) => nameOf(member.user_uuid) === member.user_uuid);
  if (unknownUsers) remember(await all("/v1/internal/users", "users"), "email");
  const reload = () => ctx.go(`#/groups/${id}`);

  const view = h("div", {}, h("p", {}, h("a", { href: "#/groups", text: "← All groups" })));
  const details = section(group.name, h("p", { text: group.description || "No description." }),
    h("p", { class: "muted" }, "UUID ", h("code", { text: group.uuid })));
  view.append(details);

  if (can["groups:update"]) {
    const name = h("input", { type: "text", name: "name", value: group.name, required: true });
    const description = h("input", { type: "text", name: "description", value: group.description });
    const form = h("form", { class: "inline", id: "group-edit" }, field("Name", name), field("Description", description),
      h("button", { type: "submit", text: "Save group" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api("PUT", `/v1/private/groups/${id}`, { body: { name: name.value.trim(), description: description.value } });
        ctx.notice("The group is saved.");
        reload();
      } catch (failure) { ctx.fail(failure); }
    });
    details.append(form);
  }
  if (can["groups:delete"]) {
    details.append(h("p", {}, confirmButton("Delete group", `Delete ${group.name} and its memberships?`, async () => {
      try {
        await api("DELETE", `/v1/private/groups/${id}`);
        ctx.notice(`Group ${group.name} is deleted.`);
        ctx.go("#/groups");
      } catch (failure) { ctx.fail(failure); }
    })));
  }

  const me = ctx.session.me.uuid;
  const removable = (member) => member.user_uuid === me || (can["members:delete"] && can[`members:assign:${member.role}`]);
  // No Actions column when no membership can be removed or left by this user.
  const acts = members.some(removable);
  const rows = members.map((member) => {
    const mine = member.user_uuid === me;
    const label = nameOf(member.user_uuid);
    if (!acts) return row(label, member.role, when(member.created_at));
    return row(label, member.role, when(member.created_at), removable(member)
      ? confirmButton(mine ? "Leave" : "Remove", mine ? "Leave this group?" : `Remove ${label}?`, async () => {
        try {
          await api("DELETE", `/v1/private/members/${member.id}`);
          ctx.notice(mine ? "You left the group." : `${label} is removed.`);
          reload();
        } catch (failure) { ctx.fail(failure); }
      }, { "aria-label": `${mine ? "Leave" : "Remove"} ${label}` })
      : "");
  });
  const membersPanel = section("Members", table(["User", "Role", "Since", ...(acts ? ["Actions"] : [])], rows, "Members"));
  view.append(membersPanel);

  const assignable = membershipRoles.filter((role) => can[`members:assign:${role}`]);
  if (can["members:create"] && assignable.length) {
    const email = h("input", { type: "email", name: "member-email", required: true, autocomplete: "off" });
    const role = h("select", { name: "role" }, assignable.map((name) =>
      h("option", { value: name, text: name, selected: name === "member" })));
    const form = h("form", { class: "inline", id: "member-add" }, field("User email", email), field("Role", role),
      h("button", { type: "submit", class: "primary", text: "Add member" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const user = await findUser(email.value);
        if (!user) { ctx.notice(`No user has the email ${email.value.trim()}.`, "error"); return; }
        await api("POST", "/v1/private/members", { body: { group_uuid: group.uuid, user_uuid: user.uuid, role: role.value } });
        ctx.notice(`${nameOf(user.uuid)} is a ${role.value} of ${group.name}.`);
        reload();
      } catch (failure) { ctx.fail(failure); }
    });
    membersPanel.append(h("h3", { text: "Add a member" }), form,
      h("p", { class: "hint", text: "Only the roles the policy lets you assign in this group are offered." }));
  }
  return view;
}
