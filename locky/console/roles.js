// Roles: the built-in ones (read-only) and custom ones: create, edit permissions, delete.

import { all, api } from "./api.js";
import { badge, button, confirmButton, field, h, row, section, table } from "./dom.js";

const PART = "[a-z*][a-z0-9_.:*\\-]{0,63}";

// Rows of resource × action inputs, each row with its own Remove button. A row left
// blank is no permission (a role may have none); a half-filled one is the service's 400.
function permissionsEditor(permissions, prefix) {
  const rows = h("div", { class: "permissions" });
  let count = 0;
  function addRow(permission = { resource: "", action: "" }) {
    count += 1;
    const resource = h("input", { type: "text", name: "resource", value: permission.resource, pattern: PART,
      id: `${prefix}-resource-${count}`, placeholder: "groups" });
    const action = h("input", { type: "text", name: "action", value: permission.action, pattern: PART,
      id: `${prefix}-action-${count}`, placeholder: "read" });
    const line = h("div", { class: "permission" }, field("Resource", resource), field("Action", action));
    line.append(button("Remove", () => { line.remove(); adder.focus(); }, { "aria-label": "Remove this permission" }));
    rows.append(line);
    return resource;
  }
  const adder = button("Add permission", () => addRow().focus());
  permissions.forEach((permission) => addRow(permission));
  const editor = h("fieldset", { class: "editor" }, h("legend", { text: "Permissions" }), rows, adder);
  editor.read = () => [...rows.querySelectorAll(".permission")].map((line) => ({
    resource: line.querySelector("input[name=resource]").value.trim(),
    action: line.querySelector("input[name=action]").value.trim(),
  })).filter((p) => p.resource || p.action);
  return editor;
}

export async function rolesScreen(ctx) {
  const roles = await all("/v1/internal/roles", "roles");
  const view = h("div", {});
  const reload = () => ctx.go("#/roles");

  if (ctx.can("roles:create")) {
    const name = h("input", { type: "text", name: "name", required: true, pattern: "[a-z][a-z0-9_\\-]{0,63}" });
    const description = h("input", { type: "text", name: "description" });
    const editor = permissionsEditor([{ resource: "", action: "" }], "new");
    const form = h("form", { id: "role-create" }, h("div", { class: "inline" },
      field("Role name", name, "Lowercase letters, digits, - and _."), field("Description", description)), editor,
      h("p", {}, h("button", { type: "submit", class: "primary", text: "Create role" })));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const role = await api("POST", "/v1/private/roles", {
          body: { name: name.value.trim(), description: description.value, permissions: editor.read() },
        });
        ctx.notice(`Role ${role.name} is created.`);
        reload();
      } catch (failure) { ctx.fail(failure); }
    });
    view.append(section("Create a role", form));
  }

  const changes = roles.some((role) => !role.builtin) && (ctx.can("roles:update") || ctx.can("roles:delete"));
  const rows = roles.map((role) => {
    const actions = h("div", { class: "actions" });
    if (!role.builtin && ctx.can("roles:update")) {
      actions.append(button("Edit", () => edit(role), { "aria-label": `Edit ${role.name}` }));
    }
    if (!role.builtin && ctx.can("roles:delete")) {
      actions.append(confirmButton("Delete", `Delete ${role.name}?`, async () => {
        try {
          await api("DELETE", `/v1/private/roles/${role.id}`);
          ctx.notice(`Role ${role.name} is deleted.`);
          reload();
        } catch (failure) { ctx.fail(failure); }
      }, { "aria-label": `Delete ${role.name}` }));
    }
    const permissions = h("ul", { class: "plain" }, role.permissions.map((p) => h("li", {}, h("code", { text: `${p.resource} × ${p.action}` }))));
    return row(h("span", {}, role.name, " ", role.builtin ? badge("built-in") : badge("custom", "good")),
      role.description, role.builtin && !role.permissions.length ? h("span", { class: "muted", text: "from the policy files" }) : permissions,
      ...(changes ? [actions] : []));
  });
  const editing = h("div", { id: "role-editing" });
  // No Actions column for someone who may change no role (it would be empty on every row).
  view.append(editing, section("Roles", table(["Role", "Description", "Permissions", ...(changes ? ["Actions"] : [])], rows, "Roles")));

  function edit(role) {
    const description = h("input", { type: "text", name: "description", value: role.description });
    const editor = permissionsEditor(role.permissions, `edit-${role.id}`);
    const form = h("form", { id: "role-edit" }, field("Description", description), editor,
      h("p", {}, h("button", { type: "submit", class: "primary", text: "Save role" }),
        button("Cancel", () => editing.replaceChildren())));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await api("PUT", `/v1/private/roles/${role.id}`, { body: { description: description.value, permissions: editor.read() } });
        ctx.notice(`Role ${role.name} is saved.`);
        reload();
      } catch (failure) { ctx.fail(failure); }
    });
    editing.replaceChildren(section(`Edit role ${role.name}`, form));
    description.focus();
  }
  return view;
}
