// OAuth clients (admins, docs/http/oauth.md): register one (a confidential client's secret
// is shown this once), give one a new secret, delete one; and, on a user's own screen,
// the consents they gave, each withdrawn with a button.

import { all, api } from "./api.js";
import { badge, button, confirmButton, field, h, row, section, table, when } from "./dom.js";

const GRANTS = ["authorization_code", "refresh_token", "client_credentials"];
const DEFAULT_GRANTS = ["authorization_code", "refresh_token"];

// Redirect URIs as typed: one per line (or separated by spaces).
function uris(text) {
  return text.split(/\s+/).filter(Boolean);
}

function check(name, label, checked) {
  const input = h("input", { type: "checkbox", name, value: label, checked });
  return { input, node: h("label", { class: "check" }, input, ` ${label}`) };
}

// A secret the service shows once: on screen until the admin moves on.
function secretShown(view, title, text, secret, reload) {
  view.replaceChildren(section(title, h("p", { text }),
    h("p", {}, h("code", { class: "secret", id: "client-secret", text: secret })),
    h("p", {}, button("Done", reload, { class: "primary" }))));
}

export async function clientsScreen(ctx) {
  const clients = await all("/v1/internal/oauth/clients", "clients", {}, 2000);
  const view = h("div", {});
  const reload = () => ctx.go("#/clients");
  if (ctx.can("oauth_clients:create")) view.append(section("Register a client", createForm(ctx, view, reload)));
  view.append(section("Clients", table(["Name", "Client id", "Type", "Grants", "Redirect URIs", "Created", "Actions"],
    clients.map((client) => {
      const actions = h("div", { class: "actions" });
      if (client.type === "confidential" && ctx.can("oauth_clients:update")) {
        actions.append(confirmButton("New secret", `Give ${client.name} a new secret? The old one stops working at once.`, async () => {
          try {
            const { client_secret: secret } = await api("POST", `/v1/private/oauth/clients/${client.id}/secret`);
            secretShown(view, `New secret of ${client.name}`,
              "The old secret no longer works. The new one is shown only now: copy it into the application.", secret, reload);
          } catch (failure) { ctx.fail(failure); }
        }, { "aria-label": `New secret for ${client.name}` }));
      }
      if (ctx.can("oauth_clients:delete")) {
        actions.append(confirmButton("Delete", `Delete ${client.name}? Its users are signed out of it.`, async () => {
          try {
            await api("DELETE", `/v1/private/oauth/clients/${client.id}`);
            ctx.notice(`${client.name} is deleted.`);
            reload();
          } catch (failure) { ctx.fail(failure); }
        }, { "aria-label": `Delete ${client.name}` }));
      }
      return row(client.name, h("code", { text: client.client_id }),
        h("span", { class: "badges" }, badge(client.type), client.first_party ? badge("first party", "good") : null),
        client.grant_types.join(", "), h("span", { class: "uris" }, client.redirect_uris.map((uri) => h("code", { text: uri }))),
        when(client.created_at), actions);
    }), "OAuth clients")));
  return view;
}

function createForm(ctx, view, reload) {
  const name = h("input", { type: "text", name: "name", required: true, autocomplete: "off" });
  const type = h("select", { name: "type" }, h("option", { value: "confidential", text: "Confidential (has a secret)", selected: true }),
    h("option", { value: "public", text: "Public (no secret, PKCE)" }));
  const redirects = h("textarea", { name: "redirect_uris", rows: "2", placeholder: "https://example.com/callback" });
  const logouts = h("textarea", { name: "post_logout_redirect_uris", rows: "1" });
  const grants = GRANTS.map((grant) => check("grant_types", grant, DEFAULT_GRANTS.includes(grant)));
  const alg = h("select", { name: "id_token_signed_response_alg" }, ["RS256", "ES256", "EdDSA"].map((value) =>
    h("option", { value, text: value, selected: value === "RS256" })));
  const firstParty = check("first_party", "First party: users are not asked to consent", false);
  const form = h("form", { id: "client-create" },
    h("div", { class: "inline" }, field("Name", name), field("Type", type), field("ID token algorithm", alg)),
    field("Redirect URIs", redirects, "One per line, matched exactly: https addresses, or plain http only to 127.0.0.1, [::1] or localhost."),
    field("Post-logout redirect URIs", logouts, "Optional, one per line."),
    h("fieldset", { class: "editor" }, h("legend", { text: "Grants" }), grants.map((grant) => grant.node)),
    h("p", {}, firstParty.node),
    h("p", {}, h("button", { type: "submit", class: "primary", text: "Register client" })));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const made = await api("POST", "/v1/private/oauth/clients", { body: {
        name: name.value.trim(), type: type.value, redirect_uris: uris(redirects.value),
        post_logout_redirect_uris: uris(logouts.value),
        grant_types: grants.filter((grant) => grant.input.checked).map((grant) => grant.input.value),
        id_token_signed_response_alg: alg.value, first_party: firstParty.input.checked,
      } });
      if (made.client_secret) {
        secretShown(view, `${made.name} is registered`,
          `Its client id is ${made.client_id}. Its secret is shown only now: copy it into the application.`,
          made.client_secret, reload);
      } else {
        ctx.notice(`${made.name} is registered; its client id is ${made.client_id}.`);
        reload();
      }
    } catch (failure) { ctx.fail(failure); }
  });
  return form;
}

// The signed-in user's consents, on their own screen: what they allowed which client.
export async function consentsSection(ctx, redraw) {
  const { consents } = await api("GET", "/v1/internal/users/me/consents");
  return section("Applications you allowed", table(["Application", "Scopes", "Allowed", "Actions"], consents.map((consent) => {
    const label = consent.client_name || consent.client_id;
    return row(consent.client_name || h("code", { text: consent.client_id }), consent.scopes.join(" "),
      when(consent.updated_at),
      confirmButton("Withdraw", `Withdraw your consent to ${label}? It signs you out of it.`, async () => {
        try {
          await api("DELETE", `/v1/private/users/me/consents/${encodeURIComponent(consent.client_id)}`);
          ctx.notice(`Your consent to ${label} is withdrawn.`);
          redraw();
        } catch (failure) { ctx.fail(failure); }
      }, { "aria-label": `Withdraw your consent to ${label}` }));
  }), "Applications you allowed"));
}
