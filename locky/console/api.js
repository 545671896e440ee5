// The public HTTP API, with the signed-in user's tokens kept in sessionStorage (this tab
// only, gone when it closes; never a cookie).

const KEY = "locky.console.tokens";

export class ApiError extends Error {
  // ``status`` 0: no answer at all (the network failed or the service did not answer in time).
  constructor(status, body, message) {
    super(message || describe(status, body));
    this.status = status;
    this.body = body;
  }
}

export const UNREACHABLE = "The Locky service could not be reached; check the connection and try again.";
const SLOW = "The Locky service did not answer in time; try again in a moment.";
const WAIT = 30000; // milliseconds a call may take

// What a refusal means, for answers whose title is only the status ("401 Unauthorized").
const PLAIN = {
  401: "You are not signed in, or your session has ended; sign in again.",
  403: "The policy does not let your account do this.",
  404: "That record is not there (any more); reload the list.",
  405: "The service does not offer this.",
  409: "Someone changed this at the same time; reload and try again.",
  413: "That is too much to send at once.",
  429: "Too many attempts; wait a little and try again.",
};
// Falcon's generic titles are the status line ("403 Forbidden"): a person reads the
// description, not the protocol.
const STATUS_LINE = /^\d{3}( |$)/;

function describe(status, body) {
  if (body && typeof body === "object" && !Array.isArray(body)) {
    if (typeof body.title === "string" && body.title) {
      const said = typeof body.description === "string" && body.description ? body.description : "";
      if (STATUS_LINE.test(body.title)) return said || PLAIN[status] || `The service refused this (${status}).`;
      return said ? `${body.title}: ${said}` : body.title;
    }
    // A 400 field map ({"email": "Not a valid email address."}); a 5xx body without a
    // title ({"status": "unavailable"}) says less than the sentences below.
    const parts = Object.entries(body).filter(([, value]) => typeof value === "string").map(([key, value]) => `${key}: ${value}`);
    if (parts.length && status < 500) return parts.join("; ");
  }
  if (status === 502 || status === 503 || status === 504) return `The Locky service is unavailable right now (${status}); try again in a moment.`;
  if (status >= 500) return `The Locky service failed (${status}); try again in a moment.`;
  return PLAIN[status] || `The service refused this (${status}).`;
}

export const tokens = {
  get() {
    try { return JSON.parse(sessionStorage.getItem(KEY) || "null"); } catch { return null; }
  },
  set(body) {
    // When the access token runs out, by this tab's clock (expires_in is relative, so a
    // skewed clock does not matter): the console refreshes a little before that.
    const life = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in * 1000 : null;
    sessionStorage.setItem(KEY, JSON.stringify({
      access: body.access_token, refresh: body.refresh_token,
      ...(life ? { expires: Date.now() + life, early: Math.min(60000, life / 5) } : {}),
    }));
  },
  clear() { sessionStorage.removeItem(KEY); },
};

let onSignedOut = () => {};
export function whenSignedOut(callback) { onSignedOut = callback; }

async function send(method, path, query, body, token) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const url = params.toString() ? `${path}?${params}` : path;
  const headers = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let resp;
  let text;
  // A network failure or a service that does not answer is an ApiError with status 0
  // and a sentence for people, never a bare TypeError ("Failed to fetch").
  try {
    resp = await fetch(url, {
      method, headers, credentials: "omit", cache: "no-store", signal: AbortSignal.timeout(WAIT),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    text = await resp.text();
  } catch (failure) {
    throw new ApiError(0, null, failure && failure.name === "TimeoutError" ? SLOW : UNREACHABLE);
  }
  let parsed = null;
  // A body that is not JSON (a proxy's HTML error page) is not shown: the status says it.
  if (text) { try { parsed = JSON.parse(text); } catch { parsed = null; } }
  return { status: resp.status, body: parsed };
}

let refreshing = null;

// Trade the refresh token for new tokens, once for every caller waiting at the same time
// (refresh tokens are single-use: two trades of one token would end the session). True
// when new tokens are held; false when the service refused the refresh token; an
// ApiError when it could not answer (the session is not given up for an outage).
function refresh() {
  const held = tokens.get();
  if (!held || !held.refresh) return Promise.resolve(false);
  if (!refreshing) {
    refreshing = send("POST", "/v1/public/users/refresh", null, { refresh_token: held.refresh })
      .then((answer) => {
        if (answer.status === 200) {
          if (!tokens.get()) return false; // signed out meanwhile
          tokens.set(answer.body);
          return true;
        }
        if (answer.status === 0 || answer.status === 429 || answer.status >= 500) throw new ApiError(answer.status, answer.body);
        return false;
      })
      .finally(() => { refreshing = null; });
  }
  return refreshing;
}

// One call: JSON in, JSON out; an expired access token is refreshed once; any other
// failure is thrown as an ApiError carrying the status and the error body.
export async function api(method, path, { query, body, anonymous = false } = {}) {
  let held = anonymous ? null : tokens.get();
  // An access token about to run out is renewed first, rather than sent to fail with a
  // 401; the 401 below stays the fallback (a token revoked or cut short meanwhile).
  if (held && held.expires && Date.now() >= held.expires - held.early && await refresh()) held = tokens.get();
  let answer = await send(method, path, query, body, held && held.access);
  if (answer.status === 401 && held) {
    const now = tokens.get();
    if (now && now.access !== held.access) {
      // Another call refreshed the tokens while this one was on its way: use the new ones.
      answer = await send(method, path, query, body, now.access);
    } else if (now && await refresh()) {
      answer = await send(method, path, query, body, tokens.get().access);
    }
    if (answer.status === 401 && tokens.get()) {
      tokens.clear();
      onSignedOut("Your session ended; sign in again.");
    }
  }
  if (answer.status >= 400) throw new ApiError(answer.status, answer.body);
  return answer.body;
}

// Every page of a list (up to ``most`` records), for the small lookups the screens need.
export async function all(path, key, query = {}, most = 2000) {
  const found = [];
  let after = 0;
  while (found.length < most) {
    const page = await api("GET", path, { query: { ...query, limit: 500, after_id: after } });
    found.push(...page[key]);
    if (page.next_after_id === null || page.next_after_id === undefined) break;
    after = page.next_after_id;
  }
  return found;
}

// Who is who: uuids seen in lists, so tables can show an email or a group name.
export const names = new Map();

export function remember(records, label) {
  for (const record of records) names.set(record.uuid, record[label]);
  return records;
}

export function nameOf(uuid) {
  return uuid ? names.get(uuid) || uuid : "";
}

// An email, or a uuid as it is: the user it names (null when there is none).
export async function findUser(text) {
  const value = text.trim();
  if (/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value)) return { uuid: value.toLowerCase() };
  const page = await api("GET", "/v1/internal/users", { query: { email: value, limit: 1 } });
  remember(page.users, "email");
  return page.users[0] || null;
}

// What the signed-in user may do: one batch of policy questions about themselves.
export async function ask(userUuid, questions, groupUuid) {
  const checks = questions.map(([resource, action]) => ({
    user_uuid: userUuid, resource, action, ...(groupUuid ? { group_uuid: groupUuid } : {}),
  }));
  const answers = {};
  for (let start = 0; start < checks.length; start += 100) {
    const part = checks.slice(start, start + 100);
    const { results } = await api("POST", "/v1/internal/authz/check", { body: { checks: part } });
    part.forEach((check, i) => { answers[`${check.resource}:${check.action}`] = results[i].allowed; });
  }
  return answers;
}
