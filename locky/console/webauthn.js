// Passkeys in the browser (docs/http/accounts.md#passkeys): the WebAuthn calls shared by the console and
// the OpenID provider's sign-in page. Locky sends ceremony options in the JSON form of
// WebAuthn Level 3 and takes back ``PublicKeyCredential.toJSON()``; browsers that do
// not have those two helpers yet get the same conversion here (base64url <-> bytes).

export function supported() {
  return typeof window.PublicKeyCredential === "function" && Boolean(navigator.credentials);
}

function bytes(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

function text(buffer) {
  if (!buffer) return undefined;
  let binary = "";
  for (const byte of new Uint8Array(buffer)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const descriptors = (list) => (list || []).map((item) => ({ ...item, id: bytes(item.id) }));

function requestOptions(json) {
  if (typeof PublicKeyCredential.parseRequestOptionsFromJSON === "function") {
    return PublicKeyCredential.parseRequestOptionsFromJSON(json);
  }
  return { ...json, challenge: bytes(json.challenge), allowCredentials: descriptors(json.allowCredentials) };
}

function creationOptions(json) {
  if (typeof PublicKeyCredential.parseCreationOptionsFromJSON === "function") {
    return PublicKeyCredential.parseCreationOptionsFromJSON(json);
  }
  return { ...json, challenge: bytes(json.challenge), user: { ...json.user, id: bytes(json.user.id) },
    excludeCredentials: descriptors(json.excludeCredentials) };
}

function asJSON(credential) {
  if (typeof credential.toJSON === "function") return credential.toJSON();
  const r = credential.response;
  const response = { clientDataJSON: text(r.clientDataJSON) };
  if (r.attestationObject) {
    response.attestationObject = text(r.attestationObject);
    if (typeof r.getTransports === "function") response.transports = r.getTransports();
  } else {
    Object.assign(response, { authenticatorData: text(r.authenticatorData), signature: text(r.signature),
      userHandle: text(r.userHandle) });
  }
  return { id: credential.id, rawId: text(credential.rawId), type: credential.type, response,
    authenticatorAttachment: credential.authenticatorAttachment || undefined,
    clientExtensionResults: credential.getClientExtensionResults ? credential.getClientExtensionResults() : {} };
}

// Locky's answer may hold the options as they are, or under ``publicKey``.
const unwrap = (answer) => (answer && answer.publicKey ? answer.publicKey : answer);

// The browser's answer to sign-in options (``navigator.credentials.get``), as JSON.
export async function assertion(options) {
  return asJSON(await navigator.credentials.get({ publicKey: requestOptions(unwrap(options)) }));
}

// A new passkey for creation options (``navigator.credentials.create``), as JSON.
export async function attestation(options) {
  return asJSON(await navigator.credentials.create({ publicKey: creationOptions(unwrap(options)) }));
}

// What a refused or cancelled ceremony means, in words for people.
export function ceremonyFailure(failure) {
  const name = failure && failure.name;
  if (name === "NotAllowedError" || name === "AbortError") return "The passkey request was cancelled or timed out.";
  if (name === "InvalidStateError") return "This device already holds a passkey for your account.";
  if (name === "SecurityError") return "This address cannot use passkeys (the site's name does not match Locky's relying party ID).";
  if (name === "NotSupportedError") return "This browser or device cannot make such a passkey.";
  return null;
}
