// The relying party's "browser": a cookie jar, redirects followed by hand, and forms
// posted as a user's browser posts them (every hidden input of the form, plus the fields
// and the button the user fills and presses). Nothing here knows Locky's pages beyond
// the field names a user sees: `email`, `password`, `code`, `decision`.

const ENTITIES = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", '#39': "'", '#x27': "'", '#34': '"', '#x2F': '/' }

export function unescapeHtml (text) {
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (whole, name) => {
    if (name in ENTITIES) return ENTITIES[name]
    if (/^#x/i.test(name)) return String.fromCodePoint(parseInt(name.slice(2), 16))
    if (name.startsWith('#')) return String.fromCodePoint(parseInt(name.slice(1), 10))
    return whole
  })
}

function attributes (tag) {
  const found = {}
  for (const m of tag.matchAll(/([^\s=<>"'/]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]+)))?/g)) {
    found[m[1].toLowerCase()] = unescapeHtml(m[2] ?? m[3] ?? m[4] ?? '')
  }
  return found
}

/** The page's forms: action, method, hidden inputs, the names of every field and button. */
export function forms (html) {
  return [...html.matchAll(/<form\b([^>]*)>([\s\S]*?)<\/form>/gi)].map(([, head, body]) => {
    const form = attributes(head)
    const hidden = {}
    const names = new Set()
    for (const [tag] of body.matchAll(/<(?:input|button|select|textarea)\b[^>]*>/gi)) {
      const a = attributes(tag.replace(/^<\w+/, ''))
      if (!a.name) continue
      names.add(a.name)
      if ((a.type ?? '').toLowerCase() === 'hidden') hidden[a.name] = a.value ?? ''
    }
    return { action: form.action ?? '', method: (form.method ?? 'get').toLowerCase(), hidden, names }
  })
}

/** The value of the input named `name` on the page (e.g. the pre-filled email). */
export function inputValue (html, name) {
  for (const [tag] of html.matchAll(/<input\b[^>]*>/gi)) {
    const a = attributes(tag.replace(/^<\w+/, ''))
    if (a.name === name) return a.value ?? ''
  }
  return undefined
}

export class Browser {
  /** `leaves(url)`: whether a redirect to `url` ends the walk (it reached the relying party). */
  constructor (origin) {
    this.origin = new URL(origin).origin
    this.jar = new Map()
  }

  async fetch (url, init = {}) {
    const headers = new Headers(init.headers)
    const host = new URL(url).host
    const cookies = [...this.jar].filter(([k]) => k.startsWith(host + '|')).map(([k, v]) => `${k.split('|')[1]}=${v}`)
    if (cookies.length) headers.set('cookie', cookies.join('; '))
    const res = await fetch(url, { ...init, headers, redirect: 'manual' })
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';')
      const i = pair.indexOf('=')
      const name = pair.slice(0, i).trim()
      const value = pair.slice(i + 1).trim()
      if (/max-age=0\b|expires=thu, 01 jan 1970/i.test(c) || value === '' || value === '""') this.jar.delete(`${host}|${name}`)
      else this.jar.set(`${host}|${name}`, value)
    }
    return res
  }

  cookie (name) {
    return this.jar.get(`${new URL(this.origin).host}|${name}`)
  }

  /** Follow redirects until one leaves the provider (→ {redirectedTo}) or a page renders (→ {res, url, html}). */
  async follow (url, init) {
    let res = await this.fetch(url, init)
    let hops = 0
    while (res.status >= 300 && res.status < 400) {
      const location = res.headers.get('location')
      if (!location) throw new Error(`${res.status} without Location from ${url}`)
      const next = new URL(location, url)
      if (next.origin !== this.origin) return { redirectedTo: next, status: res.status, headers: res.headers }
      if (++hops > 10) throw new Error(`more than 10 redirects from ${url}`)
      url = next.href
      res = await this.fetch(url)
    }
    return { res, url, status: res.status, headers: res.headers, html: await res.text() }
  }

  /** Post the form of `page` that has every field of `values` (the hidden ones come along). */
  async submit (page, values) {
    if (!page.html) throw new Error(`no page to submit (went to ${page.redirectedTo})`)
    const wanted = Object.keys(values)
    const form = forms(page.html).find((f) => f.method === 'post' && wanted.every((n) => f.names.has(n)))
    if (!form) throw new Error(`no form with ${wanted.join(', ')} on ${page.url} (status ${page.status}): ${page.html.slice(0, 400)}`)
    const body = new URLSearchParams({ ...form.hidden, ...values })
    return this.follow(new URL(form.action || page.url, page.url).href, {
      method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' }
    })
  }
}

/** RFC 6238 code (SHA-1, 6 digits, 30 s) of `secret` (base32) for the step at `at` seconds. */
export async function totp (secret, at = Date.now() / 1000) {
  const { createHmac } = await import('node:crypto')
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  let bits = ''
  for (const ch of secret.replace(/=+$/, '').toUpperCase()) bits += alphabet.indexOf(ch).toString(2).padStart(5, '0')
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)))
  const counter = Buffer.alloc(8)
  counter.writeBigUInt64BE(BigInt(Math.floor(at / 30)))
  const mac = createHmac('sha1', key).update(counter).digest()
  const offset = mac[mac.length - 1] & 0xf
  return String((mac.readUInt32BE(offset) & 0x7fffffff) % 1e6).padStart(6, '0')
}
