// The workers (#/workers) and the farm at a glance (#/farm).

import {api, optional} from './api.js';
import {timeChart} from './charts.js';
import {ago, badge, emptyState, esc, megabytes, plural, stateCounts} from './ui.js';

// The scheduler writes last_seen every few seconds, so "healthy" allows for that lag.
const kHealthyS = 15;
const kLateS = 60;

function health(worker, now) {
  if (worker.state === 'offline') return {cls: 'down', text: 'offline'};
  const age = (now - Date.parse(worker.last_seen)) / 1000;
  if (age <= kHealthyS) return {cls: 'ok', text: 'healthy'};
  if (age <= kLateS) return {cls: 'late', text: 'late heartbeat'};
  return {cls: 'down', text: 'silent'};
}

// Identical GPUs on one line: "8 × NVIDIA H100 · 80 GB · sm 9.0".
function gpus(worker) {
  if (!worker.gpus?.length) return '<span class="muted">CPU only</span>';
  const groups = new Map();
  for (const g of worker.gpus) {
    const key = `${g.name}|${g.memory_mb}|${g.compute_major}.${g.compute_minor}`;
    if (!groups.has(key)) groups.set(key, {gpu: g, n: 0});
    groups.get(key).n += 1;
  }
  return [...groups.values()].map(({gpu: g, n}) =>
      `<div class="gpu">${n > 1 ? `<b>${n} ×</b> ` : ''}<span class="gpu-name">${esc(g.name)}` +
      `</span><span class="muted"> · ${megabytes(g.memory_mb)}` +
      `${g.compute_major ? ` · sm ${g.compute_major}.${g.compute_minor}` : ''}</span></div>`)
      .join('');
}

function cloud(worker) {
  const c = worker.cloud || {};
  if (!c.provider) return '<span class="muted">on premises</span>';
  const where = [c.region, c.zone].filter(Boolean).join(' / ');
  return `<div>${esc(c.provider)}${c.instance_type ? ` · ${esc(c.instance_type)}` : ''}` +
         `${c.lifecycle === 'spot' ? ' <span class="tag spot">spot</span>' : ''}</div>` +
         (where ? `<div class="sub">${esc(where)}</div>` : '');
}

function workerRow(w, now) {
  const h = health(w, now);
  const tasks = w.current_tasks?.length
      ? w.current_tasks.map((t) => `<span class="tag">task ${esc(t)}</span>`).join(' ')
      : '<span class="muted">—</span>';
  const labels = [...(w.pools || []).filter((p) => p !== 'default'), ...(w.tags || [])];
  const sub = [w.hostname !== w.name ? w.hostname : '', w.os, w.version ? `v${w.version}` : '']
                  .filter(Boolean);
  return `<tr class="worker-row h-${h.cls}"><td><div class="worker-name">` +
         `<span class="health ${h.cls}" title="${esc(h.text)}"></span>` +
         `<b>${esc(w.name)}</b></div>` +
         (sub.length ? `<div class="sub" title="${esc(sub.join(' · '))}">` +
                           `${esc(sub.join(' · '))}</div>` : '') +
         (labels.length ? `<div class="labels">${labels.map((l) => `<span class="tag">` +
                                                                   `${esc(l)}</span>`).join('')}` +
                              '</div>' : '') +
         `</td><td>${badge(w.state)}</td><td>${gpus(w)}</td>` +
         `<td class="nowrap"><div>${plural(w.cpu_cores, 'core')} · ${megabytes(w.ram_mb)}</div>` +
         (w.cpu_model ? `<div class="sub">${esc(w.cpu_model)}</div>` : '') + '</td>' +
         `<td>${tasks}</td><td class="nowrap">${cloud(w)}</td>` +
         `<td class="nowrap"><span class="seen ${h.cls}" title="${esc(w.last_seen)}">` +
         `${esc(ago(w.last_seen, now))}</span></td></tr>`;
}

export const workersPage = {
  name: 'workers',
  title: () => 'Workers',
  skeleton() {
    return '<div class="page-head"><h1>Workers</h1><div class="counts" data-region="counts">' +
           '</div></div><section class="panel" data-region="table"><p class="loading">' +
           'Loading workers…</p></section>';
  },
  async load() {
    return (await api('/api/v1/workers')).workers;
  },
  render(workers) {
    const counts = {idle: 0, busy: 0, offline: 0};
    for (const w of workers) counts[w.state] = (counts[w.state] || 0) + 1;
    if (!workers.length) {
      return {
        counts: '',
        table: emptyState('No workers yet',
                          'Start one on a render node with <code>tessera-worker --scheduler ' +
                              'tcp://SCHEDULER:8471</code>; it appears here when it registers.',
                          {icon: 'server'}),
      };
    }
    const now = Date.now();
    // Busy first, then idle, then offline; by name within each.
    const order = {busy: 0, idle: 1, offline: 2};
    const sorted = [...workers].sort((a, b) => (order[a.state] ?? 3) - (order[b.state] ?? 3) ||
                                               a.name.localeCompare(b.name));
    return {
      counts: stateCounts(counts, ['busy', 'idle', 'offline'], {all: true}),
      table: '<table class="workers"><thead><tr><th>Worker</th><th>State</th><th>GPUs</th>' +
             '<th>CPU / RAM</th><th>Running</th><th>Cloud</th><th>Last seen</th></tr></thead>' +
             `<tbody>${sorted.map((w) => workerRow(w, now)).join('')}</tbody></table>`,
    };
  },
  describeError(error) {
    return {title: 'Cannot list workers', body: esc(error.message)};
  },
};

// ---- farm -----------------------------------------------------------------------------------

// Tasks finished per minute at each sample, over the minute before it (from done_total, for
// schedulers without /history).
function throughputOf(samples) {
  return samples.map((s, i) => {
    let j = i;
    while (j > 0 && s.time - samples[j - 1].time <= 60000) --j;
    const dt = (s.time - samples[j].time) / 60000;
    if (j === i || dt <= 0) return null;
    return Math.max(0, (s.done_total - samples[j].done_total) / dt);
  });
}

function card(title, value, detail, extra = '') {
  return `<div class="card"><div class="card-title">${title}</div>` +
         `<div class="card-value">${value}</div><div class="card-detail">${detail}</div>` +
         `${extra}</div>`;
}

function stackedStates(counts, order) {
  const total = order.reduce((n, s) => n + (counts[s] || 0), 0);
  if (!total) return '<span class="bar stacked"></span>';
  return '<span class="bar stacked">' +
         order.filter((s) => counts[s] > 0)
             .map((s) => `<i class="seg-${s}" style="width:${(100 * counts[s] / total).toFixed(2)}` +
                         `%" title="${counts[s]} ${s}"></i>`)
             .join('') +
         '</span>';
}

export const farmPage = {
  name: 'farm',
  title: () => 'Farm',
  skeleton() {
    return '<div class="page-head"><h1>Farm</h1></div><section class="cards" ' +
           'data-region="cards"><p class="loading">Loading…</p></section>' +
           '<section class="charts" data-region="charts"></section>';
  },
  async load(route, ctx) {
    const [summary, history] = await Promise.all([api('/api/v1/summary'),
                                                  optional('/api/v1/history')]);
    ctx.sawSummary(summary);
    return {summary, history};
  },
  render({summary, history}, ctx) {
    const fromServer = history && history.points?.length > 0;
    const points = fromServer
        ? history.points.map((p) => ({...p, time: Date.parse(p.time)})) : [...ctx.samples];
    // The server samples every interval_s; the farm as it is now ends the line.
    const now = Date.now();
    const last = fromServer ? points[points.length - 1] : null;
    if (last && now - last.time > 1000) {
      points.push({time: now, queued: summary.tasks.queued, running: summary.tasks.running,
                   throughput_per_min: summary.throughput_per_min ?? last.throughput_per_min});
    }
    const times = points.map((p) => p.time);
    const throughput = fromServer ? points.map((p) => p.throughput_per_min)
                                  : throughputOf(points);
    const lastRate = [...throughput].reverse().find((v) => v != null);
    const {jobs, tasks, workers} = summary;
    const live = workers.busy + workers.idle;
    const busyPct = live ? Math.round((100 * workers.busy) / live) : 0;
    const jobOrder = ['running', 'queued', 'done', 'failed', 'canceled'];
    const taskOrder = ['running', 'queued', 'done', 'failed', 'canceled'];
    const cards = [
      card('Jobs', jobs.total, stateCounts(jobs, jobOrder), stackedStates(jobs, jobOrder)),
      card('Tasks', tasks.total, stateCounts(tasks, taskOrder), stackedStates(tasks, taskOrder)),
      card('Workers', workers.total, stateCounts(workers, ['busy', 'idle', 'offline']),
           stackedStates(workers, ['busy', 'idle', 'offline'])),
      card('Throughput',
           lastRate == null ? '—' : lastRate === 0 ? '0' : lastRate.toFixed(lastRate < 10 ? 1 : 0),
           `tasks finished per minute · ${busyPct}% of live workers busy`),
    ].join('');
    const note = fromServer ? ''
                            : 'This scheduler keeps no history: the charts show what this page ' +
                                  'has seen since it opened.';
    const charts =
        timeChart({title: 'Throughput', times, note,
                   series: [{label: 'tasks / min', color: '#3fb97a', area: true,
                             values: throughput.map((v) => v ?? 0)}]}) +
        timeChart({title: 'Queue depth', times, note,
                   series: [{label: 'queued', color: '#8b95a3', area: true, integer: true,
                             values: points.map((p) => p.queued)},
                            {label: 'running', color: '#5b9cff', integer: true,
                             values: points.map((p) => p.running)}]});
    return {cards, charts};
  },
  describeError(error) {
    return {title: 'Cannot load the farm summary', body: esc(error.message)};
  },
};
