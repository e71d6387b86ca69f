// The review page: the clip list and a clip's details, the viewer with its views, the frame
// scrubber and playback, keys, display settings and the pixel probe. The previews are made
// by the server; this page only asks for them and draws them.
import { getJSON, getBitmap, query } from './api.js';
import { Viewer } from './viewer.js';

const $ = (id) => document.getElementById(id);
export const VIEWS = ['plate', 'hint', 'matte', 'fg', 'comp', 'processed'];

export const state = {
  clips: [], clip: null, frame: 0, view: 'plate', side: 'a', bg: 'checker', exposure: 0,
  display: '', playing: false, dropped: 0,
  wipe: null,       // compare: the wipe line (0..1) or null
  override: null,   // (frame, view) => Promise<ImageBitmap> | null: a tweak shown instead
};
// What is on screen, for the tests and tools/review_page.py (read only).
export const hook = (window.ckReview = { state, shown: null, loads: 0, errors: [] });
const listeners = { frame: [], clip: [] };
export function on(what, fn) { listeners[what].push(fn); }

function message(text) { $('message').textContent = text || ''; }

// ---- previews: fetched once, kept as decoded bitmaps (least recently used out) ----------
const bitmaps = new Map();
const KEEP = 96;
function bitmap(url) {
  let p = bitmaps.get(url);
  if (p) {
    bitmaps.delete(url);  // most recently used now
    bitmaps.set(url, p);
    return p;
  }
  p = getBitmap(url);
  p.catch(() => bitmaps.delete(url));
  bitmaps.set(url, p);
  while (bitmaps.size > KEEP) {
    const [k, old] = bitmaps.entries().next().value;
    bitmaps.delete(k);
    old.then((b) => b.close(), () => {});
  }
  hook.loads++;
  return p;
}
export function forget() {
  for (const p of bitmaps.values()) p.then((b) => b.close(), () => {});
  bitmaps.clear();
}

export function viewURL(frame, side, view = state.view) {
  return '/api/view?' + query({
    clip: state.clip.id, frame, view, side, bg: state.bg, exposure: state.exposure,
    display: state.display, of: view === 'diff' ? 'matte' : undefined,
  });
}

// ---- the viewer ----------------------------------------------------------------------
export const viewer = new Viewer($('view'), {
  onProbe: (p) => probe(p),
  onChange: (v) => { $('zoom-label').textContent = `${Math.round(v.scale * 100)}%`; },
});
hook.viewer = viewer;

let request = 0;
/// Shows frame `f` of the current view; a newer call wins over one still loading.
export async function showFrame(f) {
  if (!state.clip) return;
  const n = state.clip.frames.length;
  state.frame = Math.max(0, Math.min(n - 1, f));
  $('scrub').value = state.frame;
  const stem = state.clip.frames[state.frame].stem;
  $('frame-label').textContent = `${state.frame + 1} / ${n}  ${stem}`;
  const mine = ++request;
  const frame = state.frame, view = state.view, bg = state.bg, exposure = state.exposure, display = state.display;
  const side = state.wipe !== null ? 'a' : state.side;
  const key = `${frame}|${view}|${side}|${state.wipe !== null}`;
  try {
    const over = state.override && state.override(frame, view);
    const a = over ? await over : await bitmap(viewURL(frame, side));
    const b = state.wipe !== null ? await bitmap(viewURL(frame, 'b')) : null;
    if (mine !== request) return;
    viewer.wipe = state.wipe;
    viewer.show(a, b);
    message(state.clip.frames[frame].failed ? `frame failed: ${state.clip.frames[frame].failed}` : '');
    hook.shown = { frame, view, side, wipe: state.wipe, bg, exposure, display, key, tweak: !!over, at: performance.now() };
  } catch (e) {
    if (mine !== request) return;
    viewer.clear();
    message(String(e.message || e));
    hook.errors.push(String(e.message || e));
    hook.shown = { frame, view, side, key, error: String(e.message || e), at: performance.now() };
  }
  if (!state.playing) {
    for (const g of listeners.frame) g(frame);
    prefetch(frame);
  }
}

function prefetch(frame) {  // the next frames, so stepping forward finds them decoded
  if (state.override) return;
  const side = state.wipe !== null ? 'a' : state.side;
  for (let i = 1; i <= 3; i++) {
    const g = frame + i;
    if (g < state.clip.frames.length) bitmap(viewURL(g, side)).catch(() => {});
  }
}

export function setView(v) {
  state.view = v;
  for (const b of document.querySelectorAll('#views button')) b.classList.toggle('on', b.dataset.view === v);
  showFrame(state.frame);
}

export function setSide(s) {
  if (s === 'b' && !(state.clip && state.clip.compare_output)) return;
  state.side = s;
  for (const g of listeners.clip) g(state.clip);
  showFrame(state.frame);
}

// ---- playback: at the clip's rate, frames dropped rather than falling behind -----------
function play(on) {
  state.playing = on;
  $('play').textContent = on ? 'Pause' : 'Play';
  $('play').classList.toggle('on', on);
  if (!on) {
    showFrame(state.frame);
    return;
  }
  const n = state.clip.frames.length, fps = state.clip.fps || 24;
  const start = performance.now(), first = state.frame;
  let shown = first, busy = false;
  state.dropped = 0;
  hook.playLog = [];  // per frame shown: when it was asked for and when drawn (the tests read it)
  const tick = async () => {
    if (!state.playing) return;
    // The frame due now; one that is not ready in time is skipped, never waited for.
    const due = (first + Math.floor(((performance.now() - start) * fps) / 1000)) % n;
    if (due !== shown && !busy) {
      const step = (due - shown + n) % n;
      state.dropped += step - 1;
      $('dropped').textContent = state.dropped ? `${state.dropped} dropped` : '';
      shown = due;
      busy = true;
      const asked = performance.now();
      await showFrame(due);
      hook.playLog.push({ frame: due, asked, drawn: performance.now() });
      busy = false;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}

// ---- the probe: float values from the server, one request at a time -------------------
let probing = false, pending = null;
async function probe(p) {
  pending = p;
  if (probing || !state.clip) return;
  probing = true;
  while (pending) {
    const q = pending;
    pending = null;
    try {
      const r = await getJSON('/api/probe?' + query({ clip: state.clip.id, frame: state.frame, x: q.x, y: q.y }));
      const f = (v) => (v === undefined || v === null ? '-' : Number(v).toFixed(6));
      const plate = (r.plate || []).map(f).join(' ');
      let text = `x ${r.x} y ${r.y}  plate ${plate}  alpha ${f(r.alpha)}`;
      if (r.alpha_b !== undefined) text += `  alpha B ${f(r.alpha_b)}`;
      $('probe').textContent = text;
      hook.probe = r;
    } catch (e) {
      $('probe').textContent = String(e.message || e);
    }
  }
  probing = false;
}

// ---- clips ---------------------------------------------------------------------------
function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}
export { el };

export async function loadClips() {
  try {
    const r = await getJSON('/api/clips');
    state.clips = r.clips;
    const ul = $('clips');
    ul.replaceChildren();
    for (const c of r.clips) {
      const li = el('li', { 'data-id': c.id, onclick: () => openClip(c.id) },
        el('span', {}, c.name), el('span', { class: `badge ${c.status}` }, `${c.status} · ${c.frames}`));
      if (state.clip && state.clip.id === c.id) li.classList.add('selected');
      ul.append(li);
    }
    for (const s of r.skipped || []) ul.append(el('li', { class: 'failure' }, s));
    hook.clipsListed = r.clips.map((c) => c.name);
  } catch (e) {
    message(String(e.message || e));
  }
}

function dl(pairs) {
  const d = el('dl');
  for (const [k, v] of pairs) if (v !== undefined && v !== null && v !== '') d.append(el('dt', {}, k), el('dd', {}, v));
  return d;
}

function showDetails(c) {
  const run = c.run && !c.run.error ? c.run : null;
  const n = c.frames.length;
  const count = (k) => c.frames.filter((f) => f[k]).length;
  const box = $('details');
  box.replaceChildren(el('h2', {}, c.name));
  box.append(dl([
    ['folder', c.folder], ['outputs', c.output], ['frames', `${n} at ${c.fps} fps${c.video ? ' (video)' : ''}`],
    ['keyed', `matte ${count('matte')}, fg ${count('fg')}, processed ${count('processed')}, comp ${count('comp')} of ${n}`],
    ['hints', c.hints === 'files' ? 'AlphaHint/ files' : `generated (${count('hint')} in Output/AlphaHint)`],
    ['mattes', [['GarbageMatte/', c.mattes && c.mattes.garbage], ['HoldoutMatte/', c.mattes && c.mattes.holdout]]
      .filter(([, m]) => m).map(([k, m]) => `${k} ${m}`).join(', ')],
    ['screen', c.screen ? `${c.screen.screen}${c.screen.source === 'estimated' ? ' (estimated here)' : ' (as keyed)'}` : ''],
    ['plates', c.plate_colour ? (c.plate_colour.error || `${c.plate_colour.name} (${c.plate_colour.why})`) : ''],
  ]));
  box.append(el('h2', {}, 'Last run'));
  if (!run) {
    box.append(el('p', {}, c.run && c.run.error ? c.run.error : 'no run.json beside the outputs'));
  } else {
    const times = run.frame_times || [];
    const mean = times.length ? times.reduce((s, t) => s + t.infer_ms, 0) / times.length : 0;
    box.append(dl([
      ['finished', run.finished], ['engine', run.engine_version], ['profile', run.profile],
      ['precision', run.precision], ['plan', run.plan ? run.plan.origin : ''], ['device', run.device],
      ['checkpoint', run.checkpoint], ['despill', run.despill],
      ['despeckle', run.despeckle ? `on, ${run.despeckle_size} px` : 'off'],
      ['frames', `${run.frames_done} keyed, ${run.frames_failed} failed of ${run.frames_selected}${run.interrupted ? ' (interrupted)' : ''}`],
      ['inference', times.length ? `${mean.toFixed(0)} ms per frame` : ''],
    ]));
    for (const f of run.failures || []) box.append(el('div', { class: 'failure' }, `${f.frame}: ${f.message}`));
  }
}

async function showFrameFiles(frame) {
  if (!state.clip) return;
  try {
    const r = await getJSON('/api/frame?' + query({ clip: state.clip.id, frame }));
    const box = $('frame-files');
    box.replaceChildren(el('h2', {}, `Frame ${r.stem}`));
    for (const k of ['plate', 'hint', 'matte', 'fg', 'processed', 'comp']) {
      const f = r[k];
      const row = el('div', { class: 'row' }, el('span', { class: 'badge' }, k));
      if (!f) row.append('none');
      else if (f.raw) row.append(el('a', { href: f.raw, download: '' }, f.path.split('/').pop()));
      else row.append(f.path.split('/').pop());
      box.append(row);
    }
  } catch (e) {
    $('frame-files').textContent = String(e.message || e);
  }
}
on('frame', showFrameFiles);

let clipSeq = 0;  // the latest clip asked for wins over one still loading
export async function openClip(id) {
  if (state.playing) play(false);
  const mine = ++clipSeq;
  try {
    const c = await getJSON('/api/clip?' + query({ id }));
    if (mine !== clipSeq) return;
    if (!state.clip || state.clip.id !== id) state.frame = 0;  // another clip starts at its first frame
    state.clip = c;
    state.override = null;
    $('probe').textContent = '';
    if (!c.compare_output) state.side = 'a';
    for (const li of document.querySelectorAll('#clips li')) li.classList.toggle('selected', li.dataset.id === id);
    $('scrub').max = c.frames.length - 1;
    showDetails(c);
    for (const g of listeners.clip) g(c);
    await showFrame(Math.min(state.frame, c.frames.length - 1));
  } catch (e) {
    message(String(e.message || e));
  }
}

/// The clip's details again (after a key wrote outputs); the previews are fetched anew.
export async function refreshClip() {
  if (!state.clip) return;
  const id = state.clip.id, seq = clipSeq;
  forget();
  await loadClips();
  if (seq === clipSeq) await openClip(id);  // unless another clip was chosen meanwhile
}

// ---- controls ------------------------------------------------------------------------
for (const b of document.querySelectorAll('#views button')) b.addEventListener('click', () => setView(b.dataset.view));
$('zoom-fit').addEventListener('click', () => viewer.fit());
$('zoom-one').addEventListener('click', () => viewer.one());
$('reload').addEventListener('click', () => refreshClip().then(() => state.clip || loadClips()));
$('scrub').addEventListener('input', (e) => showFrame(Number(e.target.value)));
$('prev').addEventListener('click', () => showFrame(state.frame - 1));
$('next').addEventListener('click', () => showFrame(state.frame + 1));
$('play').addEventListener('click', () => state.clip && play(!state.playing));
function setBackground() {
  const v = $('bg').value;
  state.bg = v === 'custom' ? $('bg-colour').value : v;
  showFrame(state.frame);
}
$('bg').addEventListener('change', setBackground);
$('bg-colour').addEventListener('input', () => { $('bg').value = 'custom'; setBackground(); });
$('exposure').addEventListener('input', (e) => {
  state.exposure = Number(e.target.value);
  $('exposure-label').textContent = `${state.exposure > 0 ? '+' : ''}${state.exposure} EV`;
  showFrame(state.frame);
});
$('exposure').addEventListener('dblclick', (e) => { e.target.value = 0; e.target.dispatchEvent(new Event('input')); });
$('display').addEventListener('change', (e) => { state.display = e.target.value; showFrame(state.frame); });

document.addEventListener('keydown', (e) => {
  const t = e.target;
  if (t instanceof HTMLInputElement && ['text', 'number', 'color'].includes(t.type)) return;
  if (t instanceof HTMLSelectElement || e.ctrlKey || e.metaKey || e.altKey || !state.clip) return;
  if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
    e.preventDefault();
    if (state.playing) play(false);
    showFrame(state.frame + (e.key === 'ArrowLeft' ? -1 : 1));
  } else if (e.key === ' ') {
    e.preventDefault();
    play(!state.playing);
  } else if (e.key >= '1' && e.key <= '6') {
    setView(VIEWS[Number(e.key) - 1]);
  } else if (e.key === 'a' || e.key === 'A' || e.key === 'b' || e.key === 'B') {
    setSide(e.key.toLowerCase());
  }
});

async function start() {
  getJSON('/api/displays').then((d) => {  // not waited for: the first frame needs none
    for (const o of d.displays) $('display').append(el('option', { value: o.value }, o.name));
  }, (e) => message(String(e.message || e)));
  setView(state.view);
  await loadClips();
  if (state.clips.length) await openClip(state.clips[0].id);
  hook.ready = true;
}
start();
