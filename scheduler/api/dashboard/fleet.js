// The workers (#/workers) and the farm at a glance (#/farm).

import {api, optional} from './api.js';
import {barChart, sparkline, timeChart} from './charts.js';
import {ago, at, badge, clockTime, duration, emptyState, esc, gpuTime, megabytes, money, plural,
        stateCounts, verdict, when} from './ui.js';

// The scheduler writes last_seen every few seconds, so "healthy" allows for that lag.
const kHealthyS = 15;
const kLateS = 60;

function health(worker, now) {
  if (worker.state === 'offline') return {cls: 'down', text: 'offline'};
  // A faulted GPU (its telemetry: an Xid, ECC errors, lost) or a full disk takes work away.
  if (worker.health === 'unhealthy') {
    return {cls: 'down', text: `unhealthy: ${worker.health_reason || 'see its GPUs'}`};
  }
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

// What the worker has cost and its price per hour (from its node group or instance type); "–"
// for a worker without a price.
function cost(worker) {
  const group = worker.node_group
      ? `<div class="sub" title="Autoscaler node group">node group <b>${esc(worker.node_group)}` +
            '</b></div>' : '';
  if (!worker.price_per_hour && !worker.cost) return `<span class="muted">–</span>${group}`;
  const price = worker.price_per_hour ? `${money(worker.price_per_hour)} / h` : '– / h';
  return `<div>${money(worker.cost)}</div><div class="sub">${price}</div>${group}`;
}

const kUtilColor = '#5b8def';
const kMemoryColor = '#c678dd';

// Each GPU's latest reading (NVML, gpu_telemetry on the worker) and a chart of its utilisation
// and memory over the last minutes; a faulted GPU says why. Nothing for a worker without
// telemetry.
function telemetry(worker) {
  const use = (worker.gpu_use || []).filter((g) => g.telemetry || g.fault);
  if (!use.length) return '';
  return use.map((g) => {
    const t = g.telemetry || {};
    const figures = [
      t.utilization_pct != null ? `${t.utilization_pct}%` : '',
      t.memory_used_mb != null ? `${megabytes(t.memory_used_mb)} / ${megabytes(t.memory_total_mb)}`
                               : '',
      t.temperature_c != null ? `${t.temperature_c} °C` : '',
      t.power_w != null ? `${Math.round(t.power_w)} W` : '',
    ].filter(Boolean).join(' · ');
    const h = g.history || {t: [], utilization_pct: [], memory_used_mb: []};
    const total = t.memory_total_mb || 0;
    const memoryPct = h.memory_used_mb.map((m) => (m == null || !total ? null : 100 * m / total));
    const chart = h.t.length > 1
        ? sparkline({times: h.t, title: `GPU ${g.index} utilisation and memory`,
                     series: [{label: 'utilisation %', color: kUtilColor,
                               values: h.utilization_pct},
                              {label: 'memory %', color: kMemoryColor, values: memoryPct}]})
        : '';
    const fault = g.fault ? `<div class="gpu-fault" title="No new tasks on this GPU">` +
                                `${esc(g.fault)}</div>` : '';
    return `<div class="gpu-telemetry${g.fault ? ' faulted' : ''}" data-gpu="${esc(g.index)}">` +
           `<span class="sub">GPU ${esc(g.index)} · ${esc(figures || 'no reading')}</span>` +
           `${chart}${fault}</div>`;
  }).join('');
}

// 0.25, 0.5, 1: a share of a GPU as people write it.
const shareText = (x) => String(Math.round((x ?? 0) * 1000) / 1000);

// What runs where: per GPU the tasks it holds (with their share where the worker shares its
// GPUs) and its free share, then any task without a GPU. Without GPU use (a CPU worker, an
// offline one) the tasks alone.
function running(w) {
  const tag = (t, share) =>
      `<span class="tag">task ${esc(t)}${share ? ` · ${esc(share)}` : ''}</span>`;
  const use = (w.gpu_use || []).filter((g) => g.tasks?.length || w.slots_per_gpu);
  if (!use.length) {
    return w.current_tasks?.length ? w.current_tasks.map((t) => tag(t)).join(' ')
                                   : '<span class="muted">—</span>';
  }
  const onGpu = new Set();
  const rows = use.map((g) => {
    for (const t of g.tasks || []) onGpu.add(t.task_id);
    const tasks = (g.tasks || []).map((t) => tag(t.task_id, g.whole ? '' : shareText(t.share)));
    const room = g.whole ? 'whole' : `${shareText(g.free_share)} free`;
    return `<div class="gpu-use" data-gpu="${esc(g.index)}"><span class="sub">GPU ` +
           `${esc(g.index)} · ${room}</span> ` +
           `${tasks.length ? tasks.join(' ') : '<span class="muted">—</span>'}</div>`;
  });
  const rest = (w.current_tasks || []).filter((t) => !onGpu.has(t));
  return rows.join('') + rest.map((t) => tag(t)).join(' ');
}

// "3 / 8 slots" above a connected worker's running tasks (nothing for one not connected).
function slots(w) {
  if (w.slots == null) return '';
  return `<div class="sub slots">${esc(w.slots_used ?? 0)} / ${plural(w.slots, 'slot')}</div>`;
}

function workerRow(w, now, {costs}) {
  const h = health(w, now);
  const tasks = running(w);
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
         `</td><td>${badge(w.state)}</td><td>${gpus(w)}${telemetry(w)}</td>` +
         `<td class="nowrap"><div>${plural(w.cpu_cores, 'core')} · ${megabytes(w.ram_mb)}</div>` +
         (w.cpu_model ? `<div class="sub">${esc(w.cpu_model)}</div>` : '') + '</td>' +
         `<td>${slots(w)}${tasks}</td><td class="nowrap">${cloud(w)}</td>` +
         (costs ? `<td class="num nowrap">${cost(w)}</td>` : '') +
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
    // Schedulers before cost accounting say nothing of prices: no column.
    const costs = workers.some((w) => w.price_per_hour != null);
    return {
      counts: stateCounts(counts, ['busy', 'idle', 'offline'], {all: true}),
      table: '<table class="workers"><thead><tr><th>Worker</th><th>State</th><th>GPUs</th>' +
             '<th>CPU / RAM</th><th>Running</th><th>Cloud</th>' +
             (costs ? '<th class="num">Cost</th>' : '') + '<th>Last seen</th></tr></thead>' +
             `<tbody>${sorted.map((w) => workerRow(w, now, {costs})).join('')}</tbody></table>`,
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

// ---- cost ---------------------------------------------------------------------------------------

const kCostDays = 14;

// The last `n` UTC days, oldest first, as YYYY-MM-DD (the keys of GET /api/v1/costs).
function utcDays(n, now) {
  const days = [];
  for (let i = n - 1; i >= 0; --i) {
    days.push(new Date(now - i * 86400000).toISOString().slice(0, 10));
  }
  return days;
}

function dayLabel(day) {
  return new Date(`${day}T00:00:00Z`).toLocaleDateString([], {month: 'short', day: 'numeric',
                                                              timeZone: 'UTC'});
}

// Cards for today and now, and a bar per day of the last two weeks (days without cost are gaps).
function costSection(summary, costs, autoscaler, now) {
  const c = summary.cost;
  if (!c && !costs) return '';
  const cards = [];
  if (c) {
    const budget = autoscaler?.enabled && autoscaler.budget_per_hour > 0
        ? ` · autoscaler budget ${money(autoscaler.budget_per_hour)} / h` : '';
    cards.push(card('Cost today', money(c.today), 'the workers\' registered time at their price'),
               card('Cost per hour', money(c.per_hour), `the connected workers now${budget}`),
               card('GPU time today', esc(gpuTime(c.gpu_seconds_today)),
                    'spent rendering tasks, across all GPUs'));
  }
  let chart = '';
  if (costs) {
    const byDay = new Map((costs.days || []).map((d) => [d.day, d]));
    const days = utcDays(kCostDays, now);
    const bars = days.map((day, i) => {
      const d = byDay.get(day);
      return {label: dayLabel(day), value: d?.cost ?? 0, current: i === days.length - 1,
              title: `${day} (UTC): ${money(d?.cost ?? 0)} · ${gpuTime(d?.gpu_seconds)} GPU time`};
    });
    const total = costs.total ?? bars.reduce((n, b) => n + b.value, 0);
    chart = barChart({
      title: 'Cost per day', bars, empty: `No cost recorded in the last ${kCostDays} days`,
      legend: `<span class="legend-item">${kCostDays} days <b>${esc(money(total))}</b></span>`,
      // Nothing priced yet: where prices come from.
      note: total || c?.per_hour ? ''
                                 : 'A worker costs its node group\'s price, else its instance ' +
                                       'type\'s (<code>cost.instance_prices</code>), else ' +
                                       '<code>cost.default_price_per_hour</code>.',
    });
  }
  return '<div class="section-head"><h2>Cost</h2><span class="muted small">in the farm\'s ' +
         'currency · days in UTC</span></div>' +
         `<div class="cost-grid"><div class="cost-cards">${cards.join('')}</div>${chart}</div>`;
}

// ---- autoscaler ---------------------------------------------------------------------------------

const kDecisions = 15;
// Decision actions by colour: growing, shrinking, waiting, failing.
const kActionClass = {'scale-out': 'grow', 'scale-in': 'shrink', 'hold': 'wait',
                      'deadline': 'wait', 'give-up': 'bad', 'unschedulable': 'bad'};

function nodeCounts(nodes) {
  const n = {up: 0, booting: 0, draining: 0};
  for (const node of nodes || []) {
    if (node.state === 'requested') n.booting += 1;
    else if (node.state === 'draining') n.draining += 1;
    else n.up += 1;
  }
  return n;
}

function groupRow(g) {
  const n = nodeCounts(g.nodes);
  const gpu = g.gpus?.count
      ? `${g.gpus.count} × ${g.gpus.model || 'GPU'}` +
            (g.gpus.memory_mib ? ` · ${megabytes(g.gpus.memory_mib)}` : '') : '';
  const sub = [g.provider, g.instance_type, gpu].filter(Boolean).join(' · ');
  const labels = [...(g.pools || []).filter((p) => p !== 'default'), ...(g.tags || [])];
  const nodes = (g.nodes || []).map((x) => `${x.name}: ${x.state}`).join('\n');
  const chips = `<span class="count s-idle"><b>${n.up}</b> up</span>` +
                (n.booting ? `<span class="count s-queued"><b>${n.booting}</b> booting</span>`
                           : '') +
                (n.draining ? `<span class="count s-paused"><b>${n.draining}</b> draining</span>`
                            : '');
  const note = g.backoff_until
      ? `<div class="warn-note">backing off until ` +
            `${esc(clockTime(Date.parse(g.backoff_until), true))}</div>` +
            (g.backoff_cause ? `<div class="sub">${esc(g.backoff_cause)}</div>` : '')
      : '<span class="muted">—</span>';
  return `<tr class="group-row"><td><b class="group-name">${esc(g.name)}</b>` +
         (sub ? `<div class="sub">${esc(sub)}</div>` : '') +
         (labels.length ? `<div class="labels">${labels.map((l) => `<span class="tag">${esc(l)}` +
                                                                   '</span>').join('')}</div>`
                        : '') +
         `</td><td><span class="tag${g.market === 'spot' ? ' spot' : ''}">${esc(g.market)}` +
         `</span></td><td class="num">${money(g.price_per_hour)}</td>` +
         `<td><div class="counts"${nodes ? ` title="${esc(nodes)}"` : ''}>${chips}</div></td>` +
         `<td class="num nowrap">${esc(g.min_nodes)}–${esc(g.max_nodes)}</td>` +
         `<td class="num">${esc(g.planned_nodes)}</td><td>${note}</td></tr>`;
}

// The autoscaler's cost now and planned against its budget.
function budgetLine(as) {
  const current = as.cost_per_hour ?? 0;
  const planned = as.planned_cost_per_hour ?? 0;
  const budget = as.budget_per_hour ?? 0;
  const text = `now <b>${money(current)}</b> / h · planned <b>${money(planned)}</b> / h · `;
  if (!(budget > 0)) return `<div class="budget">${text}<span>no budget cap</span></div>`;
  const pct = Math.min(100, (100 * current) / budget);
  const over = Math.max(current, planned) > budget;
  return `<div class="budget${over ? ' over' : ''}">${text}budget <b>${money(budget)}</b> / h` +
         `<span class="bar" title="${pct.toFixed(0)}% of the budget in use"><i style="width:` +
         `${pct.toFixed(1)}%"></i></span></div>`;
}

function forecastRow(f) {
  const href = f.job_id ? `#/jobs/${esc(f.job_id)}` : '';
  let margin = '';
  if (f.finish) {
    const ms = Date.parse(f.deadline) - Date.parse(f.finish);
    margin = `<div class="sub">${esc(duration(Math.abs(ms)))} ${ms >= 0 ? 'to spare' : 'late'}` +
             '</div>';
  }
  return `<tr${href ? ` data-href="${href}"` : ''}>` +
         `<td>${href ? `<a href="${href}">Job ${esc(f.job_id)}</a>`
                     : '<span class="muted">—</span>'}</td><td class="nowrap">${at(f.deadline)}</td>` +
         `<td class="nowrap">${f.finish ? at(f.finish) + margin
                                         : '<span class="muted">no capacity can run it</span>'}` +
         `</td><td>${verdict(f.met)}</td></tr>`;
}

function decisionRow(d) {
  const t = Date.parse(d.at);
  const nodes = Number(d.nodes) || 0;
  return `<tr class="decision"><td class="nowrap muted"><time datetime="${esc(d.at)}" ` +
         `title="${esc(new Date(t).toLocaleString())}">${esc(clockTime(t, true))}</time></td>` +
         `<td class="nowrap"><span class="tag act a-${kActionClass[d.action] ?? 'other'}">` +
         `${esc(d.action)}</span></td>` +
         `<td class="nowrap">${d.group ? esc(d.group) : '<span class="muted">farm</span>'}</td>` +
         `<td class="num">${nodes > 0 ? `+${nodes}` : nodes < 0 ? `−${-nodes}` : ''}</td>` +
         `<td class="reason">${esc(d.reason)}</td></tr>`;
}

// Node groups, deadline forecasts and the latest decisions; one line on a farm without it.
function autoscalerSection(as, now) {
  if (!as) return '';  // a scheduler from before the autoscaler
  if (!as.enabled) {
    return '<div class="section-head"><h2>Autoscaler</h2><span class="muted small ' +
           'no-autoscaler">This farm has no autoscaler: node groups under ' +
           '<code>autoscaler.groups</code> in the scheduler\'s config add and remove render ' +
           'nodes as the queue needs them.</span></div>';
  }
  const groups = as.groups || [];
  const forecasts = as.forecasts || [];
  const decisions = (as.decisions || []).slice(0, kDecisions);
  const every = as.settings?.interval_s;
  const head = '<div class="section-head"><h2>Autoscaler</h2><span class="muted small">' +
               (as.updated_at ? `last plan ${when(as.updated_at, now)}` : 'no plan yet') +
               (every ? ` · every ${esc(plural(every, 'second'))}` : '') + '</span>' +
               budgetLine(as) + '</div>';
  const table = groups.length
      ? '<table class="groups"><thead><tr><th>Node group</th><th>Market</th>' +
            '<th class="num">Price / h</th><th>Nodes</th><th class="num">Min–max</th>' +
            '<th class="num">Planned</th><th>Note</th></tr></thead>' +
            `<tbody>${groups.map(groupRow).join('')}</tbody></table>`
      : '<p class="loading">Waiting for the autoscaler\'s first plan…</p>';
  const deadlines =
      '<div class="section-head"><h2>Deadlines</h2></div>' +
      (forecasts.length
           ? '<table class="forecasts"><thead><tr><th>Job</th><th>Deadline</th>' +
                 '<th>Forecast finish</th><th></th></tr></thead>' +
                 `<tbody>${forecasts.map(forecastRow).join('')}</tbody></table>`
           : '<p class="panel-note muted">No unfinished job has a deadline.</p>');
  const latest =
      '<div class="section-head"><h2>Latest decisions</h2><span class="muted small">newest ' +
      'first</span></div>' +
      (decisions.length
           ? '<table class="decisions"><thead><tr><th>Time</th><th>Action</th><th>Group</th>' +
                 '<th class="num">Nodes</th><th>Reason</th></tr></thead>' +
                 `<tbody>${decisions.map(decisionRow).join('')}</tbody></table>`
           : '<p class="panel-note muted">No decisions yet.</p>');
  return `${head}<section class="panel">${table}</section><div class="autoscaler-grid">` +
         `<section class="panel">${deadlines}</section><section class="panel">${latest}</section>` +
         '</div>';
}

export const farmPage = {
  name: 'farm',
  title: () => 'Farm',
  skeleton() {
    return '<div class="page-head"><h1>Farm</h1></div><section class="cards" ' +
           'data-region="cards"><p class="loading">Loading…</p></section>' +
           '<section class="charts" data-region="charts"></section>' +
           '<section class="cost" data-region="cost"></section>' +
           '<section class="autoscaler" data-region="autoscaler"></section>';
  },
  async load(route, ctx) {
    const [summary, history, costs, autoscaler] = await Promise.all([
      api('/api/v1/summary'),
      optional('/api/v1/history'),
      optional(`/api/v1/costs?days=${kCostDays}`),
      optional('/api/v1/autoscaler'),
    ]);
    ctx.sawSummary(summary);
    return {summary, history, costs, autoscaler};
  },
  render({summary, history, costs, autoscaler}, ctx) {
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
    return {cards, charts, cost: costSection(summary, costs, autoscaler, now),
            autoscaler: autoscalerSection(autoscaler, now)};
  },
  describeError(error) {
    return {title: 'Cannot load the farm summary', body: esc(error.message)};
  },
};
