// The jobs list (#/jobs, #/jobs?state=failed): newest first, filterable by state.

import {api} from './api.js';
import {badge, emptyState, esc, frameRange, when} from './ui.js';

// The filters, in the order a render goes through them. "paused" is a flag on a queued or
// running job, so the API cannot filter on it: the page does.
const kFilters = ['queued', 'running', 'paused', 'done', 'failed', 'canceled'];
const kLimit = 200;

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

function filters(summary, state) {
  const chip = (value, label, count) => {
    const href = value ? `#/jobs?state=${value}` : '#/jobs';
    const n = count == null ? '' : `<b>${count}</b>`;
    return `<a class="chip${state === value ? ' active' : ''}${value ? ` f-${value}` : ''}" ` +
           `href="${href}">${label}${n}</a>`;
  };
  const jobs = summary.jobs;
  return chip('', 'All', jobs.total) +
         kFilters.map((s) => chip(s, s[0].toUpperCase() + s.slice(1), jobs[s])).join('');
}

function row(job, now) {
  const href = `#/jobs/${job.id}`;
  const frames = job.frame_end - job.frame_start + 1;
  const note = job.notice || job.error;
  return `<tr data-href="${href}" class="job-row">` +
         `<td class="num muted">${job.id}</td>` +
         `<td><a class="job-name" href="${href}">${esc(job.name)}</a>` +
         `<div class="sub">${esc(job.renderer)}${job.project !== 'default'
                                                     ? ` · ${esc(job.project)}` : ''}</div>` +
         (note ? `<div class="sub note" title="${esc(note)}">${esc(note)}</div>` : '') + '</td>' +
         `<td>${esc(job.user)}</td>` +
         `<td>${badge(job.state)}</td>` +
         `<td>${taskBar(job.tasks)}</td>` +
         `<td class="nowrap">${frameRange(job.frame_start, job.frame_end)}` +
         `<span class="muted"> · ${frames}</span></td>` +
         `<td class="num">${job.priority}</td>` +
         `<td class="nowrap">${when(job.submitted_at, now)}</td></tr>`;
}

function table(jobs, summary, state) {
  if (!jobs.length) {
    if (summary.jobs.total === 0) {
      return emptyState('No jobs yet',
                        'No jobs yet — submit one with <code>tessera submit job.yaml</code>. ' +
                            'It shows up here as soon as the scheduler accepts it, and its ' +
                            'frames fill in as they render.');
    }
    return emptyState(`No ${esc(state)} jobs`, '<a href="#/jobs">Show all jobs</a>');
  }
  const now = Date.now();
  const more = jobs.length >= kLimit
      ? `<p class="muted more">Showing the newest ${kLimit} jobs.</p>` : '';
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
    const query = state && state !== 'paused' ? `&state=${encodeURIComponent(state)}` : '';
    const [list, summary] = await Promise.all([
      api(`/api/v1/jobs?limit=${kLimit}${query}`),
      api('/api/v1/summary'),
    ]);
    ctx.sawSummary(summary);
    const jobs = state === 'paused' ? list.jobs.filter((j) => j.state === 'paused') : list.jobs;
    return {jobs, summary, state};
  },
  render({jobs, summary, state}) {
    return {filters: filters(summary, state), table: table(jobs, summary, state)};
  },
  describeError(error) {
    return {title: 'Cannot list jobs', body: esc(error.message)};
  },
};
