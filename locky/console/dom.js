// Building the page: every node is made with createElement and every piece of data goes
// in as text (textContent or a text node), never as markup, so nothing a record holds
// can become HTML or script.

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "value") el.value = String(value);
    else if (key === "checked") el.checked = Boolean(value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  add(el, children);
  return el;
}

export function add(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

let nextId = 0;

// A labelled form field: the label names the input for screen readers and clicks.
export function field(labelText, input, hint) {
  if (!input.id) input.id = `f${++nextId}`;
  return h("div", { class: "field" }, h("label", { for: input.id, text: labelText }), input,
    hint ? h("small", { class: "hint", text: hint }) : null);
}

export function button(text, onclick, props = {}) {
  return h("button", { type: "button", ...props, onclick }, text);
}

export function table(headings, rows, caption) {
  return h("div", { class: "table-wrap" },
    h("table", {},
      caption ? h("caption", { class: "sr-only", text: caption }) : null,
      h("thead", {}, h("tr", {}, headings.map((text) => h("th", { scope: "col", text })))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headings.length, class: "empty", text: "Nothing here." })))));
}

export function row(...cells) {
  return h("tr", {}, cells.map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : h("td", {}, cell))));
}

// A destructive action asks again in place (no window.confirm): the button turns into
// "Really …? Yes / Cancel", each a real, focusable button.
export function confirmButton(text, question, action, props = {}) {
  const holder = h("span", { class: "confirm" });
  const first = button(text, () => {
    const yes = button("Yes", async () => {
      yes.disabled = true;
      try { await action(); } finally { reset(true); }
    },
      { class: "danger", "data-confirm": "yes" });
    const no = button("Cancel", () => { reset(); first.focus(); });
    holder.replaceChildren(h("span", { class: "question", text: question }), yes, no);
    yes.focus();
  }, { class: "danger", ...props });
  // Back to the first button; the keyboard's focus goes with it (not lost to the page).
  function reset(refocus = false) {
    if (!holder.isConnected) return;
    holder.replaceChildren(first);
    if (refocus) first.focus();
  }
  holder.append(first);
  return holder;
}

export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

export function badge(text, kind = "") {
  return h("span", { class: `badge ${kind}`.trim(), text });
}

export function section(title, ...children) {
  return h("section", { class: "panel" }, h("h2", { text: title }), ...children);
}
