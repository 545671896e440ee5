// The console's shell: sign-in, what the signed-in user may do, the navigation and the
// hash router (#/users, #/groups/12, ...). Each screen lives in its own module.

import { api, ApiError, ask, tokens, whenSignedOut } from "./api.js";
import { button, field, h } from "./dom.js";
import { accessScreen } from "./access.js";
import { accountScreen } from "./account.js";
import { auditScreen } from "./audit.js";
import { clientsScreen } from "./clients.js";
import { groupScreen, groupsScreen } from "./groups.js";
import { keysScreen } from "./keys.js";
import { rolesScreen } from "./roles.js";
import { userScreen, usersScreen } from "./users.js";
import { assertion, ceremonyFailure, supported as passkeysSupported } from "./webauthn.js";
import { deliveriesScreen, webhooksScreen } from "./webhooks.js";

// The questions asked once after sign-in: [resource, action] pairs of the policy.
const QUESTIONS = [
  ["users", "read"], ["users", "update"], ["users", "disable"], ["users", "delete"],
  ["groups", "read"], ["groups", "create"], ["members", "read"],
  ["roles", "read"], ["roles", "create"], ["roles", "update"], ["roles", "delete"],
  ["authz", "read"], ["audit", "read"],
  ["webhooks", "read"], ["webhooks", "create"], ["webhooks", "delete"], ["webhooks", "replay"],
  ["keys", "read"], ["keys", "rotate"],
  ["oauth_clients", "read"], ["oauth_clients", "create"], ["oauth_clients", "update"], ["oauth_clients", "delete"],
];

// Navigation: a screen shows only when the policy lets the user read what it lists.
// My account needs nothing (``needs: null``) and is reached from the header, not the list.
const SCREENS = [
  { path: "users", title: "Users", needs: "users:read", render: usersScreen },
  { path: "groups", title: "Groups", needs: "groups:read", render: groupsScreen },
  { path: "roles", title: "Roles", needs: "roles:read", render: rolesScreen },
  { path: "access", title: "Access checker", needs: "authz:read", render: accessScreen },
  { path: "audit", title: "Audit trail", needs: "audit:read", render: auditScreen },
  { path: "webhooks", title: "Webhooks", needs: "webhooks:read", render: webhooksScreen },
  { path: "keys", title: "Signing keys", needs: "keys:read", render: keysScreen },
  { path: "clients", title: "OAuth clients", needs: "oauth_clients:read", render: clientsScreen },
  { path: "account", title: "My account", needs: null, render: accountScreen, listed: false },
];
const DETAILS = {
  users: { needs: "users:read", render: userScreen },
  groups: { needs: "groups:read", render: groupScreen },
  webhooks: { needs: "webhooks:read", render: deliveriesScreen },
};

const root = document.getElementById("app");

// What a failure says to people: the service's own words, or a plain sentence.
function readable(failure) {
  if (failure instanceof ApiError) return failure.message;
  return `Something went wrong in the console (${failure && failure.message ? failure.message : failure}); reload the page.`;
}

const session = { me: null, can: {} };

function notice(text, kind = "info") {
  const box = document.getElementById("notice");
  if (!box) return;
  box.replaceChildren(text ? h("p", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status", text }) : "");
}

// A notice speaks of one action: the next one (a form sent, a button pressed on the
// screen) or another screen takes it away, so "… is disabled" never sits above a search
// or a page it has nothing to do with. The action then says its own outcome.
function startOfAction(event) {
  const screen = document.getElementById("screen");
  if (!screen || !screen.contains(event.target)) return;
  if (event.type === "submit" || event.target.closest("button")) notice("");
}
document.addEventListener("submit", startOfAction, true);
document.addEventListener("click", startOfAction, true);

// Passed to every screen: who is signed in, what they may do, and how to say things.
const context = {
  session,
  can: (what) => what === null || Boolean(session.can[what]),
  notice,
  fail: (error) => notice(readable(error), "error"),
  // A screen that moves on after a change keeps its notice ("… is created") in view.
  go: (hash) => { keepNotice = true; if (location.hash === hash) route(); else location.hash = hash; },
};

function signInScreen(message) {
  session.me = null;
  document.title = "Sign in · Locky console";
  const email = h("input", { type: "email", name: "email", autocomplete: "username", required: true });
  const password = h("input", { type: "password", name: "password", autocomplete: "current-password", required: true });
  const error = h("div", { id: "signin-error", "aria-live": "assertive" });
  const form = h("form", { id: "signin", class: "signin", novalidate: true },
    h("h1", { text: "Locky console" }),
    h("p", { class: "muted", text: "Sign in with your Locky account." }),
    field("Email", email), field("Password", password), error,
    h("button", { type: "submit", class: "primary", text: "Sign in" }),
    passkeysSupported() ? h("div", { class: "passkey" },
      h("p", { class: "muted", text: "or, without typing anything," }),
      button("Sign in with a passkey", (event) => passkeySignIn(error, event.currentTarget), { id: "signin-passkey" })) : null);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.replaceChildren();
    try {
      const answer = await api("POST", "/v1/public/users/login", {
        anonymous: true, body: { email: email.value.trim(), password: password.value },
      });
      password.value = "";
      if (answer.mfa_required) mfaScreen(answer.mfa_token);
      else await signedIn(answer);
    } catch (failure) {
      error.replaceChildren(h("p", { class: "notice error", role: "alert", text: readable(failure) }));
      password.focus();
    }
  });
  root.replaceChildren(h("main", { class: "signin-page", id: "main" },
    message ? h("p", { class: "notice info", role: "status", text: message }) : null, form));
  email.focus();
}

// A discoverable passkey: no email, the browser offers the passkeys it holds for Locky.
// The answer is the password's: tokens, or the second step.
async function passkeySignIn(error, pressed) {
  error.replaceChildren();
  pressed.disabled = true; // one ceremony at a time: a second would cancel the first
  try {
    const options = await api("POST", "/v1/public/users/login/passkey/options", { anonymous: true, body: {} });
    const credential = await assertion(options);
    const answer = await api("POST", "/v1/public/users/login/passkey", { anonymous: true, body: { credential } });
    if (answer.mfa_required) mfaScreen(answer.mfa_token);
    else await signedIn(answer);
  } catch (failure) {
    const said = ceremonyFailure(failure) || readable(failure);
    error.replaceChildren(h("p", { class: "notice error", role: "alert", text: said }));
  } finally {
    pressed.disabled = false;
  }
}

function mfaScreen(mfaToken) {
  const code = h("input", { type: "text", name: "code", autocomplete: "one-time-code", inputmode: "numeric", required: true });
  const error = h("div", { "aria-live": "assertive" });
  const form = h("form", { id: "mfa", class: "signin", novalidate: true },
    h("h1", { text: "Two-step sign-in" }),
    h("p", { class: "muted", text: "Enter the 6-digit code of your authenticator app, or a recovery code." }),
    field("Authentication code", code), error,
    h("button", { type: "submit", class: "primary", text: "Verify" }),
    button("Start over", () => signInScreen()));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await signedIn(await api("POST", "/v1/public/users/login/mfa", {
        anonymous: true, body: { mfa_token: mfaToken, code: code.value.replace(/\s+/g, "") },
      }));
    } catch (failure) {
      error.replaceChildren(h("p", { class: "notice error", role: "alert", text: readable(failure) }));
      // A wrong code, or no answer: try again here. Anything else (the sign-in expired): start over.
      const again = failure instanceof ApiError
        && (failure.status === 0 || failure.status === 400 || failure.status === 401 || failure.status === 429 || failure.status >= 500);
      if (again) code.select();
      else signInScreen(readable(failure));
    }
  });
  root.replaceChildren(h("main", { class: "signin-page", id: "main" }, form));
  code.focus();
}

async function signedIn(answer) {
  tokens.set(answer);
  if (location.hash === "" || location.hash === "#/") history.replaceState(null, "", "#/users");
  await start();
}

async function signOut() {
  let message = "You are signed out.";
  try {
    await api("POST", "/v1/private/users/logout");
  } catch (failure) {
    // The session ends in this tab either way; say so when the service did not hear of it.
    if (failure instanceof ApiError && (failure.status === 0 || failure.status >= 500)) {
      message = `You are signed out of this tab, but the service could not be told (${readable(failure)}).`;
    }
  }
  tokens.clear();
  history.replaceState(null, "", location.pathname);
  signInScreen(message);
}

async function start() {
  if (!tokens.get()) { signInScreen(); return; }
  // Signed in (session.me set) only once both answers are in: until then no screen draws.
  session.me = null;
  try {
    const me = await api("GET", "/v1/internal/users/me");
    let can;
    try {
      can = await ask(me.uuid, QUESTIONS);
    } catch (failure) {
      if (!(failure instanceof ApiError) || failure.status !== 403) throw failure;
      // Not allowed to ask the policy: offer every screen; each says so on a 403.
      can = Object.fromEntries(QUESTIONS.map(([r, a]) => [`${r}:${a}`, a === "read"]));
    }
    Object.assign(session, { me, can });
  } catch (failure) {
    if (!tokens.get()) return; // the session ended: the sign-in screen says so already
    if (failure instanceof ApiError && (failure.status === 0 || failure.status >= 500)) unreachable(readable(failure));
    else signInScreen(readable(failure));
    return;
  }
  shell();
  route();
}

// Signed in, but the service does not answer: say so, and offer to try again.
function unreachable(message) {
  const again = button("Try again", () => start(), { class: "primary", id: "retry" });
  root.replaceChildren(h("main", { class: "signin-page", id: "main" },
    h("div", { class: "signin" }, h("h1", { text: "Locky console" }),
      h("p", { class: "notice error", role: "alert", text: message }), again,
      button("Sign in again", () => { tokens.clear(); signInScreen(); }))));
  again.focus();
}

function shell() {
  const links = SCREENS.filter((screen) => screen.listed !== false && context.can(screen.needs)).map((screen) =>
    h("li", {}, h("a", { href: `#/${screen.path}`, id: `nav-${screen.path}`, text: screen.title })));
  root.replaceChildren(
    h("a", { href: "#main", class: "skip", text: "Skip to content", onclick: (event) => {
      event.preventDefault(); document.getElementById("main").focus();
    } }),
    h("header", { class: "top" },
      h("span", { class: "brand", text: "Locky console" }),
      h("span", { class: "who" }, h("span", { id: "who", text: session.me.email }),
        h("a", { href: "#/account", id: "account", text: "My account" }),
        button("Sign out", signOut, { id: "signout" }))),
    h("div", { class: "layout" },
      h("nav", { "aria-label": "Screens" }, h("ul", {}, links)),
      h("main", { id: "main", tabindex: "-1" }, h("div", { id: "notice", "aria-live": "polite" }), h("div", { id: "screen" }))));
}

let routing = 0;
let keepNotice = false;
// A move to another screen (a link followed, back or forward) puts the keyboard on the
// new screen's heading, so the next Tab starts there; a redraw after an action does not.
let focusHeading = false;

async function route() {
  if (!session.me || !document.getElementById("screen")) return;
  const [path, id] = location.hash.replace(/^#\/?/, "").split("/");
  const visible = SCREENS.filter((screen) => context.can(screen.needs));
  let screen = SCREENS.find((s) => s.path === path);
  let render = screen && screen.render;
  if (id && DETAILS[path]) render = /^\d+$/.test(id) ? ((ctx) => DETAILS[path].render(ctx, Number(id))) : null;
  if (!screen || !context.can(screen.needs) || !render) {
    // Say why this is not the screen asked for (a typed or bookmarked address). Some
    // screen is always open: My account.
    const asked = screen ? screen.title.toLowerCase() : null;
    const instead = visible[0].path === "account" ? "Here is your account instead."
      : `Here are the ${visible[0].title.toLowerCase()} instead.`;
    const why = !path ? "" : screen && !context.can(screen.needs)
      ? `Your account may not open the ${asked}: the policy does not give it that screen. ${instead}`
      : `The console has no screen at #/${location.hash.replace(/^#\/?/, "")}. ${instead}`;
    notice(why, "info");
    keepNotice = Boolean(why);
    location.replace(`#/${visible[0].path}`);
    return;
  }
  for (const link of document.querySelectorAll("nav a, header a")) {
    if (link.getAttribute("href") === `#/${path}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  document.title = `${screen.title} · Locky console`;
  const target = document.getElementById("screen");
  const mine = ++routing;
  if (!keepNotice) notice("");
  keepNotice = false;
  target.replaceChildren(h("h1", { text: screen.title }), h("p", { class: "muted", text: "Loading…" }));
  target.setAttribute("aria-busy", "true");
  try {
    const view = await render(context);
    if (mine === routing) {
      const heading = h("h1", { text: screen.title, tabindex: "-1" });
      target.replaceChildren(heading, view);
      if (focusHeading) heading.focus();
    }
  } catch (failure) {
    if (mine !== routing) return;
    const text = failure instanceof ApiError && failure.status === 403
      ? "The policy does not let you see this." : readable(failure);
    target.replaceChildren(h("h1", { text: screen.title }), h("p", { class: "notice error", role: "alert", text }));
  } finally {
    if (mine === routing) {
      target.removeAttribute("aria-busy");
      focusHeading = false;
    }
  }
}

whenSignedOut((message) => signInScreen(message));
window.addEventListener("hashchange", () => { focusHeading = true; route(); });
start();
