// The jobs list (#/jobs?state=failed&user=ana&before=ID): newest first, by state and by user,
// a page at a time.

import {api} from './api.js';
import {badge, emptyState, esc, frameRange, when} from './ui.js';

// The filters, in the order a render goes through them. "paused" is a flag on a queued or
// running job, so the API cannot filter on it: the page does.
const kFilters = ['queued', 'running', 'paused', 'done', 'failed', 'canceled'];
const kLimit = 100;  // jobs a page

// Tasks by state as one bar: done, running, failed, canceled (queued is the empty rest).
export function taskBar(tasks, {wide = false} = {}) {
  const total = tasks.total || 0;
  const pct = (n) => (total ? (100 * n) / total : 0).toFixed(2);
  const segments = ['done', 'running', 'failed', 'canceled']
                       .filter((s) => tasks[s] > 0)
                       .map((s) => `<i class="seg-${s}" style="width:${pct(tasks[s])}%"></i>`)
                       .join('');
  return `<span class="bar-wrap${wide ? ' wide' : ''}"><span class="bar stacked" ` +
         `role="progressbar" aria-valuemin="0" aria-valuemax="${total}" ` +
         `aria-valuenow="${tasks.done}">${segments}</span>` +
         `<span class="bar-label">${tasks.done}/${total}</span></span>`;
}

function link(params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v)).toString();
  return `#/jobs${query ? `?${query}` : ''}`;
}

function filters({summary, state, user}, ctx) {
  // Farm-wide counts: shown only while the list is farm-wide too.
  const counts = user ? {} : summary.jobs;
  const chip = (value, label, count) => {
    const n = count == null ? '' : `<b>${count}</b>`;
    return `<a class="chip${state === value ? ' active' : ''}" href="${link({state: value, user})}"` +
           `>${label}${n}</a>`;
  };
  let html = chip('', 'All', counts.total) +
             kFilters.map((s) => chip(s, s[0].toUpperCase() + s.slice(1), counts[s])).join('');
  const me = ctx.me;
  if (me.auth !== 'none') {
    const mine = user === me.user;
    html += `<a class="chip mine${mine ? ' active' : ''}" title="Only jobs submitted by ` +
            `${esc(me.user)}" href="${link({state, user: mine ? '' : me.user})}">Mine</a>`;
  } else if (user) {
    html += `<a class="chip mine active" href="${link({state})}">User: ${esc(user)} ×</a>`;
  }
  return html;
}

function row(job, now) {
  const href = `#/jobs/${job.id}`;
  const frames = job.frame_end - job.frame_start + 1;
  const note = job.error || job.notice;
  return `<tr data-href="${href}" class="job-row">` +
         `<td class="num muted">${job.id}</td>` +
         `<td><a class="job-name" href="${href}">${esc(job.name)}</a>` +
         `<div class="sub">${esc(job.renderer)}${job.project !== 'default'
                                                     ? ` · ${esc(job.project)}` : ''}</div>` +
         (note ? `<div class="sub note${job.error ? ' bad' : ''}" title="${esc(note)}">` +
                     `${esc(note)}</div>` : '') +
         '</td>' +
         `<td>${esc(job.user)}</td>` +
         `<td>${badge(job.state)}</td>` +
         `<td>${taskBar(job.tasks)}</td>` +
         `<td class="nowrap">${frameRange(job.frame_start, job.frame_end)}` +
         `${frames > 1 ? `<span class="muted"> · ${frames}</span>` : ''}</td>` +
         `<td class="num">${job.priority}</td>` +
         `<td class="nowrap">${when(job.submitted_at, now)}</td></tr>`;
}

function table({jobs, summary, state, user, before, next}) {
  if (!jobs.length) {
    if (summary.jobs.total === 0) {
      return emptyState('No jobs yet',
                        'Submit one with <code>tessera submit job.yaml</code> — it shows up ' +
                            'here as soon as the scheduler accepts it, and its frames fill in ' +
                            'as they render.');
    }
    const what = `No ${esc(state)} jobs${user ? ` by ${esc(user)}` : ''}${before ? ' older' : ''}`;
    return emptyState(what.replace('  ', ' '), '<a href="#/jobs">Show all jobs</a>');
  }
  const now = Date.now();
  const pages = [
    before ? `<a href="${link({state, user})}">← Newest jobs</a>` : '',
    next ? `<a class="older" href="${link({state, user, before: next})}">Older jobs →</a>` : '',
  ].filter(Boolean);
  const more = pages.length ? `<p class="more pages">${pages.join('')}</p>` : '';
  return '<table class="jobs"><thead><tr><th class="num">ID</th><th>Name</th><th>User</th>' +
         '<th>State</th><th>Tasks done</th><th>Frames</th><th class="num">Priority</th>' +
         `<th>Submitted</th></tr></thead><tbody>${jobs.map((j) => row(j, now)).join('')}` +
         `</tbody></table>${more}`;
}

export const jobsPage = {
  name: 'jobs',
  title: () => 'Jobs',
  skeleton() {
    return '<div class="page-head"><h1>Jobs</h1>' +
           '<nav class="filters" data-region="filters"></nav></div>' +
           '<section class="panel" data-region="table"><p class="loading">Loading jobs…</p>' +
           '</section>';
  },
  async load(route, ctx) {
    const state = route.params.get('state') || '';
    const user = route.params.get('user') || '';
    const before = route.params.get('before') || '';
    const query = new URLSearchParams({limit: kLimit});
    if (state && state !== 'paused') query.set('state', state);
    if (user) query.set('user', user);
    if (before) query.set('before', before);
    const [list, summary] = await Promise.all([api(`/api/v1/jobs?${query}`),
                                               api('/api/v1/summary')]);
    ctx.sawSummary(summary);
    const jobs = state === 'paused' ? list.jobs.filter((j) => j.state === 'paused') : list.jobs;
    return {jobs, summary, state, user, before, next: list.next_before ?? null};
  },
  render(data, ctx) {
    return {filters: filters(data, ctx), table: table(data)};
  },
  describeError(error) {
    return {title: 'Cannot list jobs', body: esc(error.message)};
  },
};
