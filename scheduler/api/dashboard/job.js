// One job (#/jobs/ID): its state and counts, the actions the user's role allows, a grid of frame
// thumbnails that fills in as frames finish (parts of frames in progress), the files its tasks
// (or its steps' tasks) returned, movies among them playing on the page, what is running now,
// and the failed tasks with their messages and log tails.

import {api, ApiError, fileUrl, imageUrl, optional} from './api.js';
import {taskBar} from './jobs.js';
import {at, badge, duration, esc, frameRange, gpuTime, money, plural, stateCounts, verdict,
        when} from './ui.js';

const kMaxCells = 2000;         // frames drawn in the grid
const kMaxFailures = 50;        // failed tasks listed
const kMaxRunning = 200;        // running tasks listed
const kLogLines = 80;           // lines of a log shown (the tail)
const kThumbFetches = 4;        // thumbnails fetched at once
const kThumbRetryMs = 5000;     // after a fetch failed for want of the scheduler
const kTaskOrder = ['done', 'running', 'queued', 'failed', 'canceled'];
const kFinished = ['done', 'failed', 'canceled'];
const kListFetches = 4;         // file listings fetched at once
const kDownloadRevokeMs = 60000;  // a download's object URL outlives the browser's read of it

// Without GET .../frames (older schedulers): a frame's state from the tasks that render it.
function framesFromTasks(job, tasks) {
  const frames = new Map();
  const last = Math.min(job.frame_end, job.frame_start + kMaxCells - 1);
  for (let f = job.frame_start; f <= last; ++f) {
    frames.set(f, {frame: f, parts_total: 0, parts_done: 0, thumbnail: false, flag: null, by: {}});
  }
  for (const t of tasks) {
    for (let f = Math.max(t.frame_start, job.frame_start); f <= Math.min(t.frame_end, last); ++f) {
      const frame = frames.get(f);
      frame.parts_total += 1;
      frame.parts_done += t.state === 'done';
      frame.by[t.state] = (frame.by[t.state] || 0) + 1;
    }
  }
  return [...frames.values()].map(({by, ...frame}) => {
    const done = frame.parts_total > 0 && frame.parts_done === frame.parts_total;
    const state = by.failed ? 'failed' : done ? 'done' : by.running || frame.parts_done
                                                             ? 'running' : by.canceled ? 'canceled'
                                                                                       : 'queued';
    return {...frame, state};
  });
}

// The deadline, and when the job finished or (the autoscaler's forecast) will finish against it.
function deadlineFacts(job) {
  if (!job.deadline) return [];
  const deadline = Date.parse(job.deadline);
  if (job.finished_at) {
    const late = Date.parse(job.finished_at) > deadline;
    return [['Deadline', `${at(job.deadline)} ${verdict(!late, late ? 'Finished after its ' +
                                                                       'deadline' : '')}`]];
  }
  let forecast = '<span class="muted" title="The autoscaler has no forecast: no capacity could ' +
                 'run it, or the farm has no autoscaler">—</span>';
  if (job.forecast_finish) {
    const late = Date.parse(job.forecast_finish) > deadline;
    forecast = `${at(job.forecast_finish)} ${verdict(!late)}`;
  }
  return [['Deadline', at(job.deadline)], ['Forecast finish', forecast]];
}

function head(job, frames) {
  const started = job.started_at ? Date.parse(job.started_at) : null;
  const end = job.finished_at ? Date.parse(job.finished_at) : Date.now();
  const framesDone = frames.filter((f) => f.state === 'done').length;
  const nFrames = job.frame_end - job.frame_start + 1;
  const pct = job.tasks.total ? Math.floor((100 * job.tasks.done) / job.tasks.total) : 0;
  const facts = [
    ['User', esc(job.user)],
    ['Renderer', esc(job.renderer)],
    ['Project', esc(job.project)],
    ['Priority', job.priority],
    ['Frames', frameRange(job.frame_start, job.frame_end) + (nFrames > 1 ? ` (${nFrames})` : '')],
    ['Submitted', when(job.submitted_at)],
    ['Run time', started ? duration(end - started) : '—'],
  ];
  if (job.eta_s != null) facts.push(['Time left', `≈ ${duration(job.eta_s * 1000)}`]);
  if (job.cost != null) facts.push(['Cost', esc(money(job.cost))]);
  if (job.gpu_seconds != null) facts.push(['GPU time', esc(gpuTime(job.gpu_seconds))]);
  facts.push(...deadlineFacts(job));
  if (job.interruptible === false) {
    facts.push(['Spot', '<span title="Not interruptible: spot nodes never run its tasks">never' +
                        '</span>']);
  }
  if (job.step != null) {
    facts.unshift(['Step', `${esc(job.step)} of <a href="#/jobs/${job.pipeline_id}">job ` +
                           `#${job.pipeline_id}</a>`]);
  }
  const callouts = [
    job.error ? `<div class="callout bad"><b>Error</b> ${esc(job.error)}</div>` : '',
    job.notice ? `<div class="callout warn"><b>Waiting</b> ${esc(job.notice)}</div>` : '',
    steps(job),
  ].join('');
  return '<a class="back" href="#/jobs">← All jobs</a>' +
         `<div class="job-title"><h1>${esc(job.name)} <span class="muted">#${job.id}</span></h1>` +
         `${badge(job.state)}</div>` +
         `<dl class="facts">${facts.map(([k, v]) => `<div><dt>${k}</dt><dd>${v}</dd></div>`)
                                  .join('')}</dl>` +
         `<div class="job-progress"><span class="pct">${pct}%</span>` +
         `${taskBar(job.tasks, {wide: true})}</div>` +
         `<div class="counts">${stateCounts(job.tasks, kTaskOrder)}` +
         (Array.isArray(job.steps)
              ? `<span class="count count-frames"><b>${job.steps.filter((s) => s.state === 'done')
                                                           .length}</b> of ` +
                    `${plural(job.steps.length, 'step')} done</span>`
              : `<span class="count count-frames"><b>${framesDone}</b> of ` +
                    `${plural(nFrames, 'frame')} done</span>`) +
         '</div>' +
         callouts;
}

// A job with steps: a row per step with its progress and what it waits for (each step is a job
// of its own page).
function steps(job) {
  if (!Array.isArray(job.steps)) return '';
  const rows = job.steps.map((step) => {
    const after = (step.step_depends_on || [])
        .map((d) => esc(d.step) + (d.per_frame ? ' <span class="muted">(per frame)</span>' : ''))
        .join(', ');
    return `<tr><td><a href="#/jobs/${step.id}">${esc(step.step)}</a></td>` +
           `<td>${badge(step.state)}</td><td>${esc(step.renderer)}</td>` +
           `<td>${taskBar(step.tasks)}</td><td>${step.tasks.done} / ${step.tasks.total}</td>` +
           `<td>${after || '<span class="muted">—</span>'}</td></tr>`;
  });
  return '<h2>Steps</h2><table class="steps"><thead><tr><th>Step</th><th>State</th>' +
         '<th>Renderer</th><th>Progress</th><th>Tasks</th><th>After</th></tr></thead>' +
         `<tbody>${rows.join('')}</tbody></table>`;
}

function actions(job, ctx) {
  const st = ctx.state;
  if (ctx.me.role === 'viewer') return '';
  if (!ctx.canAct(job)) {
    return `<p class="muted small">This job belongs to ${esc(job.user)}; a submitter may only ` +
           'change their own jobs.</p>';
  }
  const finished = ['done', 'failed', 'canceled'].includes(job.state);
  const busy = (name) => (st.busy === name ? ' disabled aria-busy="true"' : '');
  const buttons = [];
  if (!finished) {
    buttons.push(job.paused ? `<button data-act="resume"${busy('resume')}>Resume</button>`
                            : `<button data-act="pause"${busy('pause')}>Pause</button>`);
  }
  if (job.tasks.failed + job.tasks.canceled > 0) {
    buttons.push(`<button data-act="retry"${busy('retry')}>Retry failed</button>`);
  }
  if (!finished) {
    buttons.push(`<form data-act="priority" class="inline"><label>Priority <input name="priority" ` +
                 `type="number" min="0" max="100" value="${job.priority}"></label>` +
                 `<button type="submit"${busy('priority')}>Set</button></form>`);
    buttons.push(`<button class="danger" data-act="cancel"${busy('cancel')}>Cancel job</button>`);
  }
  const msg = st.msg ? `<p class="act-msg ${st.msg.ok ? 'ok' : 'bad'}">${esc(st.msg.text)}</p>` : '';
  return `<div class="actions">${buttons.join('')}</div>${msg}`;
}

function frameCell(frame, job, progressByFrame, thumbs) {
  const thumb = thumbs.get(frame.frame);
  let inner = '';
  if (frame.state === 'done' && thumb) {
    inner = `<img src="${thumb}" alt="frame ${frame.frame}" decoding="async">`;
  } else if (frame.state === 'done') {
    inner = '<span class="ph">✓</span>';
  } else if (frame.state === 'running') {
    const split = frame.parts_total > 1;
    const fraction = split ? frame.parts_done / frame.parts_total
                           : progressByFrame.get(frame.frame) ?? 0;
    const label = split ? `${frame.parts_done}/${frame.parts_total} parts`
                        : `${Math.round(100 * fraction)}%`;
    inner = `<span class="parts"><span class="bar"><i style="width:${(100 * fraction).toFixed(1)}%">` +
            `</i></span><small>${label}</small></span>`;
  } else if (frame.state === 'failed') {
    inner = '<span class="ph">✕</span>';
  }
  const wantsThumb = frame.state === 'done' && frame.thumbnail && thumb === undefined;
  const flag = frame.flag ? `<span class="flag" title="${esc(frame.flag)}">!</span>` : '';
  const title = `Frame ${frame.frame}: ${frame.state}${frame.flag ? ` — ${frame.flag}` : ''}`;
  return `<figure class="frame f-${esc(frame.state)}" data-frame="${frame.frame}"` +
         `${wantsThumb ? ` data-thumb="${frame.frame}"` : ''} title="${esc(title)}">` +
         `<div class="thumb">${inner}</div><figcaption>${frame.frame}${flag}</figcaption></figure>`;
}

function frameGrid(data, ctx) {
  const {job, frames, running} = data;
  const progressByFrame = new Map();
  for (const t of running) {
    for (let f = t.frame_start; f <= t.frame_end; ++f) progressByFrame.set(f, t.progress);
  }
  const counts = {};
  for (const f of frames) counts[f.state] = (counts[f.state] || 0) + 1;
  const shown = frames.slice(0, kMaxCells);
  const more = frames.length > shown.length
      ? `<p class="muted small">Showing the first ${kMaxCells} of ${frames.length} frames.</p>` : '';
  return `<div class="section-head"><h2>Frames</h2><span class="legend">` +
         `${stateCounts(counts, ['done', 'running', 'queued', 'failed', 'canceled'])}</span></div>` +
         `<div class="frames">${shown.map((f) => frameCell(f, job, progressByFrame,
                                                            ctx.state.thumbs)).join('')}</div>` +
         more;
}

function runningNow(now) {
  if (!now.length) return '';
  return `<div class="section-head"><h2>Rendering now</h2></div><table class="tasks"><thead><tr>` +
         '<th class="num">Task</th><th>Frames</th><th>Worker</th><th>Attempt</th><th>Progress</th>' +
         '<th>Started</th></tr></thead><tbody>' +
         now.map((t) => `<tr><td class="num muted">${t.id}</td>` +
                        `<td>${frameRange(t.frame_start, t.frame_end)}</td>` +
                        `<td>${esc(t.worker_name ?? '—')}</td><td>${t.attempt}</td>` +
                        `<td><span class="bar-wrap"><span class="bar"><i style="width:` +
                        `${(100 * t.progress).toFixed(1)}%"></i></span><span class="bar-label">` +
                        `${Math.round(100 * t.progress)}%</span></span>` +
                        (t.status_line ? `<div class="muted status-line">${esc(t.status_line)}</div>`
                                       : '') +
                        '</td>' +
                        `<td>${when(t.started_at)}</td></tr>`)
             .join('') +
         '</tbody></table>';
}

function tail(text, lines) {
  const all = String(text ?? '').replace(/\s+$/, '').split('\n');
  if (all.length <= lines) return esc(all.join('\n'));
  return `<span class="muted">… ${all.length - lines} earlier lines</span>\n` +
         esc(all.slice(-lines).join('\n'));
}

function logOf(entry) {
  if (!entry || entry.loading) return '<p class="muted small">Loading the log…</p>';
  if (entry.missing) {
    return '<p class="muted small">This scheduler does not serve task logs yet; the message above ' +
           'is what the worker reported.</p>';
  }
  if (entry.error) return `<p class="act-msg bad">${esc(entry.error)}</p>`;
  const attempts = [...(entry.attempts || [])].sort((a, b) => b.attempt - a.attempt);
  if (!attempts.length) return '<p class="muted small">No log was recorded.</p>';
  return attempts.map(attemptOf).join('');
}

// One attempt as the API reports it: its outcome (with the failure's class, and whether it was
// charged), its worker, when it ran, why it ended, and its log.
function attemptOf(a) {
  const outcome = a.outcome ?? a.state;
  const cls = a.failure_class ? ` <span class="attempt-class">${esc(a.failure_class)}</span>` : '';
  const charged = outcome === 'failed' && a.charged === false ? ' <span class="muted">not charged</span>' : '';
  const ran = a.started_at && a.ended_at
                  ? ` · ${duration(new Date(a.ended_at) - new Date(a.started_at))}`
                  : '';
  const message = a.message ? `<div class="attempt-msg">${esc(a.message)}</div>` : '';
  return `<div class="attempt" data-attempt="${a.attempt}" data-outcome="${esc(outcome)}">` +
         `<div class="attempt-head">Attempt ${a.attempt} · ${esc(a.worker ?? 'no worker')} ` +
         `${badge(outcome)}${cls}${charged}<span class="muted">${when(a.ended_at ?? a.at)}${ran}` +
         `</span></div>${message}` +
         `<pre class="log">${a.log ? tail(a.log, kLogLines) : '<span class="muted">(empty)</span>'}` +
         '</pre></div>';
}

function failures(failed, job, ctx) {
  if (!failed.length) return '';
  const st = ctx.state;
  const total = Math.max(job.tasks.failed, failed.length);
  const items = failed.map((t) => {
    const open = st.open.has(t.id);
    return `<details class="failure" data-task="${t.id}"${open ? ' open' : ''}><summary>` +
           `<span class="fail-title">Task ${t.id} · frame${t.frame_end > t.frame_start ? 's' : ''} ` +
           `${frameRange(t.frame_start, t.frame_end)}` +
           ` · attempt ${t.attempt}${t.worker_name ? ` · ${esc(t.worker_name)}` : ''}` +
           ` · ${when(t.finished_at)}</span>` +
           `<span class="fail-msg">${esc(t.message || 'no message')}</span></summary>` +
           `<div class="fail-log">${open ? logOf(st.logs.get(t.id)) : ''}</div></details>`;
  });
  const more = total > failed.length
      ? `<p class="muted small">and ${total - failed.length} more</p>` : '';
  return `<div class="section-head"><h2>Failed tasks <span class="muted">${total}</span>` +
         '</h2><span class="muted small">Open one for its log</span></div>' + items.join('') +
         more;
}

// ---- returned files ----
// A command job with `outputs: files` returns files into its output folder; a job with steps
// has them on its steps (a pipeline's encode step returns preview.mp4). They are listed once a
// job or step has finished -- a failed one keeps what its finished tasks returned -- and listed
// again only when its state changes (a retried job finishes anew), never on every refresh.

// Whose returned files the page lists: the job's own and, for a job with steps, each step's,
// labelled with the step's name.
function outputSources(job) {
  const own = {id: job.id, state: job.state, label: null};
  if (!Array.isArray(job.steps)) return [own];
  return [own, ...job.steps.map((s) => ({id: s.id, state: s.state, label: s.step}))];
}

function outputPath(id, name) {
  return `/api/v1/jobs/${id}/outputs/${name.split('/').map(encodeURIComponent).join('/')}`;
}

const isMovie = (name) => /\.mp4$/i.test(name);

// Bytes as "812 B", "2.8 KB", "31.5 MB", "1.2 GB" (powers of 1024, as megabytes() counts).
function fileSize(bytes) {
  const n = Number(bytes) || 0;
  if (n < 1024) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = n / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const shown = value >= 100 ? String(Math.round(value)) : value.toFixed(1).replace(/\.0$/, '');
  return `${shown} ${units[unit]}`;
}

// Forgets what was listed for job `id` (its state changed), with its movies.
function dropOutputs(st, id) {
  st.outputs.delete(id);
  for (const [key, movie] of st.movies) {
    if (movie.job !== id) continue;
    if (movie.url) URL.revokeObjectURL(movie.url);
    st.movies.delete(key);
  }
}

function syncOutputs(sources, ctx) {
  const st = ctx.state;
  for (const {id, state} of sources) {
    if (st.outputs.has(id) && st.outputs.get(id).state !== state) dropOutputs(st, id);
    if (!kFinished.includes(state)) continue;
    const had = st.outputs.get(id);
    if (had && !(had.retryAt && had.retryAt <= Date.now())) continue;
    const entry = {state, loading: true, files: [], truncated: false};
    st.outputs.set(id, entry);
    st.listQueue.push({id, entry});
  }
  pumpListings(ctx);
}

// Lists a few jobs' files at once: a job may have many steps.
function pumpListings(ctx) {
  const st = ctx.state;
  while (st.listing < kListFetches && st.listQueue.length) {
    const {id, entry} = st.listQueue.shift();
    if (st.outputs.get(id) !== entry) continue;  // its state changed while it waited
    st.listing += 1;
    listOutputs(id, entry).finally(() => {
      st.listing -= 1;
      if (st.closed) return;
      if (st.outputs.get(id) === entry) ctx.repaint();
      pumpListings(ctx);
    });
  }
}

// GET .../outputs with a one-frame page: returned files come with the first page whatever its
// size. Left out: frame files (the grid's), and in a job's listing its steps' files (with
// `step`), which each step's own listing has -- also a step's with an output folder of its own.
async function listOutputs(id, entry) {
  try {
    const reply = await optional(`/api/v1/jobs/${id}/outputs?count=1`);
    for (const f of reply?.files ?? []) {
      if (f.step != null) continue;
      if (f.truncated) entry.truncated = true;
      else if (f.frame == null) entry.files.push(f);
    }
  } catch (e) {
    // An outage: listed again on a paint a little later.
    if (e instanceof ApiError && e.transient) entry.retryAt = Date.now() + kThumbRetryMs;
    else entry.error = e.message;
  }
  entry.loading = false;
}

// The files listed for the sources as they stand now: [{source, file}].
function returnedFiles(sources, st) {
  const listed = [];
  for (const source of sources) {
    const entry = st.outputs.get(source.id);
    if (!entry || entry.loading || entry.state !== source.state) continue;
    for (const file of entry.files) listed.push({source, file});
  }
  return listed;
}

// A movie is fetched whole with the token (a <video src> cannot send one), once, when its place
// on the page scrolls into view; its object URL lives until the page is left.
async function fetchMovie(id, name, ctx) {
  const st = ctx.state;
  const key = `${id}/${name}`;
  const had = st.movies.get(key);
  if (had && !(had.retryAt && had.retryAt <= Date.now())) return;
  const movie = {job: id, loading: true};
  st.movies.set(key, movie);
  try {
    movie.url = await fileUrl(outputPath(id, name));
  } catch (e) {
    if (e instanceof ApiError && e.transient) movie.retryAt = Date.now() + kThumbRetryMs;
    else movie.error = e.message;
  }
  movie.loading = false;
  if (st.closed || st.movies.get(key) !== movie) {
    if (movie.url) URL.revokeObjectURL(movie.url);
    return;
  }
  ctx.repaint();
}

// A player per movie. Its own region, so that a change to the list (a download under way)
// never replaces a playing <video>.
function moviePlayers(listed, st) {
  const figures = listed.filter(({file}) => isMovie(file.name)).map(({source, file}) => {
    const movie = st.movies.get(`${source.id}/${file.name}`);
    let player;
    if (movie?.url) {
      player = `<video controls preload="metadata" src="${esc(movie.url)}"></video>`;
    } else if (movie?.error) {
      player = `<div class="movie-ph"><span class="bad">Cannot load the movie: ` +
               `${esc(movie.error)}</span></div>`;
    } else {
      player = `<div class="movie-ph" data-movie="${source.id}" data-name="${esc(file.name)}">` +
               `<span class="muted">Loading the movie…</span></div>`;
    }
    const label = source.label == null ? '' : `<span class="muted">${esc(source.label)} ·</span> `;
    return `<figure class="movie">${player}<figcaption>${label}${esc(file.name)}</figcaption>` +
           '</figure>';
  });
  return figures.length ? `<div class="movies">${figures.join('')}</div>` : '';
}

function fileList(listed, sources, job, st) {
  const withSteps = Array.isArray(job.steps);
  const notes = [];
  for (const source of sources) {
    const entry = st.outputs.get(source.id);
    if (!entry || entry.loading || entry.state !== source.state) continue;
    const whose = source.label == null ? 'this job' : `step ${esc(source.label)}`;
    if (entry.error) {
      notes.push(`<p class="panel-note act-msg bad">Cannot list the files of ${whose}: ` +
                 `${esc(entry.error)}</p>`);
    } else if (entry.truncated) {
      notes.push(`<p class="panel-note muted">Only the first ${entry.files.length} files of ` +
                 `${whose} are listed; the rest are in its output folder.</p>`);
    }
  }
  if (!listed.length) return notes.join('');
  const rows = listed.map(({source, file}) => {
    const key = `${source.id}/${file.name}`;
    const busy = st.downloading.has(key) ? ' disabled aria-busy="true"' : '';
    const failed = st.downloadError?.key === key
        ? ` <span class="bad small">${esc(st.downloadError.text)}</span>` : '';
    const step = !withSteps ? ''
        : source.label == null ? '<td class="muted">this job</td>'
                               : `<td><a href="#/jobs/${source.id}">${esc(source.label)}</a></td>`;
    return `<tr data-file="${esc(key)}">${step}<td class="file-name">${esc(file.name)}</td>` +
           `<td class="num" title="${Number(file.size) || 0} bytes">${fileSize(file.size)}</td>` +
           `<td class="num"><button type="button" class="link" data-act="download" ` +
           `data-job="${source.id}" data-name="${esc(file.name)}"${busy}>Download</button>` +
           `${failed}</td></tr>`;
  });
  return `<table class="files"><thead><tr>${withSteps ? '<th>Step</th>' : ''}<th>File</th>` +
         `<th class="num">Size</th><th></th></tr></thead><tbody>${rows.join('')}</tbody></table>` +
         notes.join('');
}

// Fetches the file with the token and hands its object URL to an <a download> (an address of
// the API would reach the browser's download without the token).
async function download(el, ctx) {
  const st = ctx.state;
  const id = Number(el.dataset.job);
  const name = el.dataset.name;
  const key = `${id}/${name}`;
  if (st.downloading.has(key)) return;
  st.downloading.add(key);
  if (st.downloadError?.key === key) st.downloadError = null;
  ctx.repaint();
  // A movie on the page is fetched already.
  const shown = st.movies.get(key)?.url;
  try {
    const url = shown ?? await fileUrl(outputPath(id, name));
    const a = document.createElement('a');
    a.href = url;
    a.download = name.split('/').pop();
    document.body.append(a);
    a.click();
    a.remove();
    if (!shown) setTimeout(() => URL.revokeObjectURL(url), kDownloadRevokeMs);
  } catch (e) {
    st.downloadError = {key, text: `Cannot download it: ${e.message}`};
  }
  st.downloading.delete(key);
  if (!st.closed) ctx.repaint();
}

// Fetches thumbnails a few at a time, as their cells scroll into view.
function pumpThumbs(ctx) {
  const st = ctx.state;
  while (st.fetching < kThumbFetches && st.queue.length) {
    const frame = st.queue.shift();
    st.fetching += 1;
    let settled = true;
    imageUrl(`/api/v1/jobs/${st.jobId}/frames/${frame}/thumbnail`)
        .then((url) => {
          if (st.closed) return URL.revokeObjectURL(url);
          st.thumbs.set(frame, url);
        })
        .catch((e) => {
          // Not there: a placeholder. An outage: tried again on a paint a little later.
          if (e instanceof ApiError && !e.transient) {
            st.thumbs.set(frame, null);
          } else {
            settled = false;
            st.retryAt.set(frame, Date.now() + kThumbRetryMs);
          }
        })
        .finally(() => {
          st.fetching -= 1;
          st.queued.delete(frame);
          if (st.closed) return;
          pumpThumbs(ctx);
          if (settled) ctx.repaint();
        });
  }
}

export const jobPage = {
  name: 'job',
  title: (route) => `Job ${route.id}`,
  init(route) {
    return {jobId: route.id, thumbs: new Map(), logs: new Map(), open: new Set(), queue: [],
            queued: new Set(), retryAt: new Map(), fetching: 0, msg: null, busy: null,
            observer: null, closed: false,
            // Returned files: job id -> {state, files, truncated, loading, error, retryAt} as
            // listed when the job had that state; "job/name" -> {job, url, error, retryAt} for
            // movies; downloads under way ("job/name") and the last one that failed.
            outputs: new Map(), listQueue: [], listing: 0, movies: new Map(),
            downloading: new Set(), downloadError: null, outputsShown: false};
  },
  leave(st) {
    st.closed = true;
    st.observer?.disconnect();
    for (const url of st.thumbs.values()) if (url) URL.revokeObjectURL(url);
    for (const movie of st.movies.values()) if (movie.url) URL.revokeObjectURL(movie.url);
  },
  skeleton() {
    return '<section class="job-head" data-region="head"><p class="loading">Loading job…</p>' +
           '</section><section data-region="actions" class="job-actions"></section>' +
           '<section class="panel" data-region="frames"></section>' +
           '<section class="panel outputs" hidden><div class="section-head"><h2>Files ' +
           '<span class="muted" data-region="fileCount"></span></h2><span class="muted small">' +
           'What its tasks returned</span></div><div data-region="movies"></div>' +
           '<div data-region="files"></div></section>' +
           '<section data-region="running"></section><section data-region="failures"></section>';
  },
  async load(route) {
    if (!Number.isInteger(route.id) || route.id <= 0) {
      throw new ApiError(400, 'invalid_argument', 'a job id is a positive whole number');
    }
    const base = `/api/v1/jobs/${route.id}`;
    // Only the tasks the page lists; frames carry the rest. (The filter again here, for
    // schedulers that answer every task whatever the state asked.)
    const tasksIn = (state, limit) => api(`${base}/tasks?state=${state}&limit=${limit}`)
                                          .then((r) => r.tasks.filter((t) => t.state === state));
    const [job, frames, running, failed] = await Promise.all([
      api(base).then((r) => r.job),
      optional(`${base}/frames?count=${kMaxCells}`),
      tasksIn('running', kMaxRunning),
      tasksIn('failed', kMaxFailures),
    ]);
    // Schedulers without .../frames: each frame's state from all the tasks.
    const all = frames ? null : (await api(`${base}/tasks`)).tasks;
    return {job, running, failed, frames: frames ? frames.frames : framesFromTasks(job, all)};
  },
  render(data, ctx) {
    // A frame that is no longer done (re-rendered) loses its old thumbnail.
    const st = ctx.state;
    for (const f of data.frames) {
      if (f.state !== 'done' && st.thumbs.has(f.frame)) {
        if (st.thumbs.get(f.frame)) URL.revokeObjectURL(st.thumbs.get(f.frame));
        st.thumbs.delete(f.frame);
      }
    }
    const sources = outputSources(data.job);
    syncOutputs(sources, ctx);
    const listed = returnedFiles(sources, st);
    const files = fileList(listed, sources, data.job, st);
    st.outputsShown = files !== '';
    return {
      head: head(data.job, data.frames),
      actions: actions(data.job, ctx),
      // A job with steps has no frames of its own: each step's page shows its frames.
      frames: Array.isArray(data.job.steps) ? '' : frameGrid(data, ctx),
      fileCount: listed.length ? String(listed.length) : '',
      movies: moviePlayers(listed, st),
      files,
      running: runningNow(data.running),
      failures: failures(data.failed, data.job, ctx),
    };
  },
  after(root, ctx) {
    const st = ctx.state;
    if (!st.observer) {
      st.observer = new IntersectionObserver((entries) => {
        for (const entry of entries) {
          if (!entry.isIntersecting) continue;
          st.observer.unobserve(entry.target);
          const {movie, name} = entry.target.dataset;
          if (movie) {
            fetchMovie(Number(movie), name, ctx);
            continue;
          }
          const frame = Number(entry.target.dataset.thumb);
          if (st.thumbs.has(frame) || st.queued.has(frame)) continue;
          if ((st.retryAt.get(frame) ?? 0) > Date.now()) continue;
          st.queued.add(frame);
          st.queue.push(frame);
        }
        pumpThumbs(ctx);
      }, {rootMargin: '300px'});
    }
    st.observer.disconnect();
    for (const el of root.querySelectorAll('[data-thumb], [data-movie]')) st.observer.observe(el);
    const outputs = root.querySelector('.outputs');
    if (outputs) outputs.hidden = !st.outputsShown;
  },
  async toggle(el, ctx) {
    if (!el.matches('details[data-task]')) return;
    const st = ctx.state;
    const id = Number(el.dataset.task);
    if (!el.open) {
      st.open.delete(id);
      return;
    }
    // Painted open again (a refresh), not opened by the user: nothing to do.
    if (st.open.has(id)) return;
    st.open.add(id);
    if (!st.logs.has(id) || st.logs.get(id).error) {
      st.logs.set(id, {loading: true});
      ctx.repaint();
      try {
        const log = await optional(`/api/v1/tasks/${id}/log`);
        st.logs.set(id, log ?? {missing: true});
      } catch (e) {
        st.logs.set(id, {error: `Cannot load the log: ${e.message}`});
      }
    }
    ctx.repaint();
  },
  async act(name, el, ctx) {
    if (name === 'download') return download(el, ctx);
    const st = ctx.state;
    const id = st.jobId;
    let body;
    if (name === 'priority') {
      const value = Number(el.elements.priority.value);
      if (!Number.isInteger(value) || value < 0 || value > 100) {
        st.msg = {ok: false, text: 'Priority is a whole number from 0 to 100.'};
        return ctx.repaint();
      }
      body = {priority: value};
      el.elements.priority.blur();
    }
    if (name === 'cancel' && !confirm(`Cancel job ${id}? Its queued and running tasks stop.`)) {
      return;
    }
    st.busy = name;
    ctx.repaint();
    const result = await ctx.post(`/api/v1/jobs/${id}/${name}`, body);
    st.busy = null;
    const done = {
      cancel: 'Canceled.', pause: 'Paused: no new tasks start.', resume: 'Resumed.',
      priority: `Priority set to ${body?.priority}.`,
      retry: `Requeued ${plural(result.body?.tasks_requeued ?? 0, 'task')}.`,
    };
    st.msg = result.ok ? {ok: true, text: done[name]} : {ok: false, text: result.message};
    ctx.refresh();
  },
  describeError(error, route) {
    if (error.status === 404) {
      return {title: `Job ${esc(route.id)} does not exist`,
              body: 'It may have been deleted. <a href="#/jobs">Back to all jobs</a>'};
    }
    return {title: `Cannot show job ${esc(route.id)}`, body: esc(error.message)};
  },
};
