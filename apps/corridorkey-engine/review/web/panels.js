// The right-hand panels: compare two output roots (A/B, wipe, |A - B| x 8, the mattes'
// MSE), tweak despill and despeckle on the loaded model (no files written; "Save settings"
// writes a job file, "Write" keys Processed and Comp with them), and keys with progress,
// ETA, cancel and failures (server-sent events).
import { state, hook, on, el, showFrame, setView, setSide, refreshClip } from './app.js';
import { getJSON, postJSON, decode, query } from './api.js';

const tools = document.getElementById('tools');
const $ = (id) => document.getElementById(id);
function section(title, ...kids) { return el('section', {}, el('h2', {}, title), ...kids); }

// ---- compare -------------------------------------------------------------------------
const compare = section('Compare A / B',
  el('div', { class: 'row' },
    el('button', { id: 'side-a', title: 'A', onclick: () => setSide('a') }, 'A'),
    el('button', { id: 'side-b', title: 'B', onclick: () => setSide('b') }, 'B'),
    el('button', { id: 'diff', title: '|A - B| x 8 of the mattes', onclick: () => setView('diff') }, '|A-B| x8')),
  el('div', { class: 'row' },
    el('label', {}, el('input', { type: 'checkbox', id: 'wipe-on' }), ' wipe'),
    el('input', { type: 'range', id: 'wipe', min: 0, max: 100, value: 50 })),
  el('div', { id: 'mse', class: 'mono' }),
  el('div', { id: 'compare-roots' }));
tools.append(compare);
function setWipe() {
  state.wipe = $('wipe-on').checked ? Number($('wipe').value) / 100 : null;
  showFrame(state.frame);
}
$('wipe-on').addEventListener('change', setWipe);
$('wipe').addEventListener('input', () => { if ($('wipe-on').checked) setWipe(); });

let mse = [];
async function loadMse() {
  mse = [];
  if (!state.clip || !state.clip.compare_output) return;
  try {
    mse = (await getJSON('/api/mse?' + query({ clip: state.clip.id }))).mse;
  } catch (e) {
    $('mse').textContent = String(e.message || e);
  }
  hook.mse = mse;
  showMse(state.frame);
}
function showMse(frame) {
  const v = mse[frame];
  const known = mse.filter((x) => x !== null && x !== undefined);
  const mean = known.length ? known.reduce((s, x) => s + x, 0) / known.length : null;
  $('mse').textContent = v === undefined || v === null ? 'matte MSE: -'
    : `matte MSE frame ${frame + 1}: ${v.toExponential(4)}` + (mean !== null ? `\nmean of ${known.length}: ${mean.toExponential(4)}` : '');
}
on('frame', showMse);
on('clip', (c) => {
  compare.hidden = !c || !c.compare_output;
  $('side-a').classList.toggle('on', state.side === 'a');
  $('side-b').classList.toggle('on', state.side === 'b');
  if (c) $('compare-roots').textContent = c.compare_output ? `A: ${c.output}\nB: ${c.compare_output}` : '';
});
on('clip', (c) => { if (c && c.id !== loadMse.clip) { loadMse.clip = c.id; loadMse(); } });

// ---- tweak ---------------------------------------------------------------------------
const tweak = section('Tweak (no files written)',
  el('div', { class: 'row' }, el('label', {}, 'Despill ',
    el('input', { type: 'range', id: 'despill', min: 0, max: 10, step: 0.1, value: 5 })),
    el('span', { id: 'despill-value', class: 'mono' }, '5')),
  el('div', { class: 'row' }, el('label', {}, el('input', { type: 'checkbox', id: 'despeckle', checked: '' }), ' despeckle'),
    el('label', {}, ' size ', el('input', { type: 'number', id: 'despeckle-size', min: 1, value: 400, step: 50 }))),
  el('div', { class: 'row' },
    el('button', { id: 'tweak-reset', title: 'back to the files' }, 'Show files'),
    el('button', { id: 'save-settings' }, 'Save settings'),
    el('button', { id: 'write' }, 'Write')),
  el('div', { id: 'tweak-info', class: 'mono' }),
  el('div', { id: 'settings-out' }));
tools.append(tweak);

function tweakBody(frame, view) {
  return {
    clip: state.clip.id, frame, view, despill: Number($('despill').value), despeckle: $('despeckle').checked,
    despeckle_size: Number($('despeckle-size').value), bg: state.bg, exposure: state.exposure, display: state.display,
  };
}
let started = 0;
async function tweakBitmap(frame, view) {
  const v = view === 'processed' ? 'processed' : 'comp';
  const r = await fetch('/api/tweak', {
    method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(tweakBody(frame, v)),
  });
  if (!r.ok) {
    const j = await r.json().catch(() => ({}));
    throw new Error(j.error || `tweak: status ${r.status}`);
  }
  const t = JSON.parse(r.headers.get('X-CK-Timings') || '{}');
  const bmp = await decode(await r.blob());
  const f = (x) => (x === undefined ? '-' : `${x.toFixed(0)} ms`);
  $('tweak-info').textContent = `key ${f(t.key_ms)} · post ${f(t.post_ms)} · display ${f(t.display_ms)}` +
    ` · request ${f(performance.now() - started)}`;
  hook.tweak = { timings: t, despill: Number($('despill').value), ms: performance.now() - started };
  return bmp;
}
function override(frame, view) {
  return view === 'comp' || view === 'processed' ? tweakBitmap(frame, view) : null;
}
let busy = false, dirty = false;
async function retweak() {  // one request at a time; the last settings always shown
  state.override = override;
  if (state.view !== 'comp' && state.view !== 'processed') setView('comp');
  if (busy) { dirty = true; return; }
  busy = true;
  do {
    dirty = false;
    started = performance.now();
    await showFrame(state.frame);
  } while (dirty);
  busy = false;
}
$('despill').addEventListener('input', (e) => { $('despill-value').textContent = e.target.value; retweak(); });
$('despeckle').addEventListener('change', retweak);
$('despeckle-size').addEventListener('change', retweak);
$('tweak-reset').addEventListener('click', () => { state.override = null; $('tweak-info').textContent = ''; showFrame(state.frame); });
$('save-settings').addEventListener('click', async () => {
  try {
    const r = await postJSON('/api/settings', { ...tweakBody(state.frame, 'comp'), profile: $('profile').value });
    $('settings-out').replaceChildren(el('div', {}, 'Saved ', el('code', {}, r.path)),
      el('div', {}, 'Apply it with:'), el('pre', { class: 'mono' }, r.job_run),
      el('div', {}, 'or:'), el('pre', { class: 'mono' }, r.inference));
    hook.saved = r;
  } catch (e) {
    $('settings-out').textContent = String(e.message || e);
  }
});
$('write').addEventListener('click', async () => {
  try {
    const r = await postJSON('/api/write', { ...tweakBody(state.frame, 'comp'), profile: $('profile').value });
    hook.lastJob = r.job;
  } catch (e) {
    $('tweak-info').textContent = String(e.message || e);
  }
});
on('clip', (c) => {
  tweak.hidden = !c;
  const run = c && c.run && !c.run.error ? c.run : null;  // start from what the clip was keyed with
  if (run && typeof run.despill === 'number') {
    $('despill').value = run.despill;
    $('despill-value').textContent = String(run.despill);
    $('despeckle').checked = !!run.despeckle;
    $('despeckle-size').value = run.despeckle_size;
  }
});

// ---- key -----------------------------------------------------------------------------
const key = section('Key',
  el('div', { class: 'row' }, el('label', {}, 'Profile ', el('select', { id: 'profile' })),
    el('label', {}, 'Screen ', el('select', { id: 'screen' }, el('option', {}, 'auto'), el('option', {}, 'green'), el('option', {}, 'blue')))),
  el('div', { class: 'row' }, el('button', { id: 'key-start' }, 'Key this clip')),
  el('div', { id: 'jobs' }));
tools.append(key);
$('key-start').addEventListener('click', async () => {
  try {
    const r = await postJSON('/api/key', { clip: state.clip.id, profile: $('profile').value, screen: $('screen').value });
    hook.lastJob = r.job;
  } catch (e) {
    $('jobs').prepend(el('div', { class: 'failure' }, String(e.message || e)));
  }
});

function hms(s) {
  const t = Math.round(s);
  return `${Math.floor(t / 60)}:${String(t % 60).padStart(2, '0')}`;
}
const finished = new Set();
let first = true;  // jobs already over when the page opened change nothing on screen
function showJobs(jobs) {
  hook.jobs = jobs;
  const box = $('jobs');
  box.replaceChildren();
  for (const j of [...jobs].reverse()) {
    const pct = j.frames_total ? Math.round((100 * j.frames_done) / j.frames_total) : (j.state === 'done' ? 100 : 0);
    const bar = el('div', { class: 'progress' }, el('div'));
    bar.firstChild.style.width = `${pct}%`;
    const text = `${j.id} ${j.kind} ${j.clip} (${j.profile}): ${j.frames_done} / ${j.frames_total} frames, ${pct}%` +
      (j.eta_s !== undefined ? `, ETA ${hms(j.eta_s)}` : '') + ` · ${j.state}`;
    const row = el('div', { class: 'job', 'data-job': j.id, 'data-state': j.state }, el('div', { class: 'job-text' }, text), bar);
    if (j.state === 'queued' || j.state === 'running')
      row.append(el('button', { class: 'cancel', onclick: () => postJSON('/api/cancel', { job: j.id }).catch(() => {}) }, 'Cancel'));
    if (j.message) row.append(el('div', { class: 'dim' }, j.message));
    for (const f of j.failures) row.append(el('div', { class: 'failure' }, `${f.frame}: ${f.message}`));
    box.append(row);
    if (!['queued', 'running'].includes(j.state) && !finished.has(j.id)) {
      finished.add(j.id);
      if (!first && state.clip && j.clip_id === state.clip.id) refreshClip().then(loadMse);
    }
  }
  first = false;
}
// The browser reconnects a dropped stream on its own, but not one that was refused (the
// server stopping, too many streams): then try again in a few seconds.
function listen() {
  const events = new EventSource('/api/events');
  events.onmessage = (e) => showJobs(JSON.parse(e.data));
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED) setTimeout(listen, 3000);
  };
}
listen();

(async () => {
  try {
    const r = await getJSON('/api/profiles');
    for (const p of r.profiles) $('profile').append(el('option', { value: p }, p));
    $('profile').value = r.default;
  } catch (e) {
    $('jobs').textContent = String(e.message || e);
  }
})();
