// Requests to the review server: same origin, the token in its HttpOnly cookie.

export async function getJSON(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  const j = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(j.error || `${url}: status ${r.status}`);
  return j;
}

export async function postJSON(url, body) {
  const r = await fetch(url, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const type = r.headers.get('Content-Type') || '';
  if (!r.ok) {
    const j = await r.json().catch(() => ({}));
    throw new Error(j.error || `${url}: status ${r.status}`);
  }
  return type.startsWith('image/') ? r.blob() : r.json();
}

/// A PNG decoded with its values as they are: no colour conversion, no premultiplication,
/// so a canvas holds the server's 8-bit levels exactly.
export function decode(blob) {
  return createImageBitmap(blob, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
}

export async function getBitmap(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  if (!r.ok) {
    const j = await r.json().catch(() => ({}));
    throw new Error(j.error || `status ${r.status}`);
  }
  return decode(await r.blob());
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null) q.set(k, String(v));
  return q.toString();
}
