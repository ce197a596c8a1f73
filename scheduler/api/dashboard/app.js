// The dashboard's shell: sign-in, the hash router (#/jobs, #/jobs/ID, #/workers, #/farm), and
// keeping the current page fresh — from the scheduler's event stream when it has one, by polling
// every 2 s when it does not. A page is an object with skeleton(route) (its static frame with
// [data-region] slots), load(route, ctx) (fetches its data), render(data, ctx) (HTML per region)
// and optionally init/after/act/toggle/leave. Only regions whose HTML changed are replaced, so
// an open log or a half-typed priority survives a refresh.

import {adoptTokenFromUrl, api, ApiError, followEvents, setToken, token} from './api.js';
import {farmPage, workersPage} from './fleet.js';
import {jobPage} from './job.js';
import {jobsPage} from './jobs.js';
import {emptyState, esc} from './ui.js';

const pages = {jobs: jobsPage, job: jobPage, workers: workersPage, farm: farmPage};
const kRoles = ['viewer', 'submitter', 'operator', 'admin'];
const kPollMs = 2000;           // without an event stream
const kPollLiveMs = 15000;      // with one: a safety net, and relative times move on
const kMinRefreshGapMs = 500;   // events refresh the page at most twice a second
const kMaxSamples = 720;

const $ = (selector) => document.querySelector(selector);

const app = {
  me: null,           // GET /api/v1/whoami
  view: null,         // {page, route, root, data, state, html: Map(region -> html), painted}
  lastOk: 0,          // when the API last answered
  samples: [],        // summaries seen, for the farm charts when /history is missing
  refreshing: false,
  again: false,
  lastRefresh: 0,
  refreshTimer: null,
};

const live = {mode: 'connecting', why: '', controller: null, pollTimer: null, retryTimer: null,
              lastEventId: null};

// ---- routing --------------------------------------------------------------------------------

function parseRoute() {
  const hash = location.hash.replace(/^#/, '') || '/jobs';
  const [path, query = ''] = hash.split('?');
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'jobs' && parts[1]) return {name: 'job', id: Number(parts[1]), params};
  if (parts[0] === 'workers' || parts[0] === 'farm') return {name: parts[0], params};
  return {name: 'jobs', params};
}

function navigate() {
  if (!app.me) return;
  const route = parseRoute();
  const page = pages[route.name];
  if (app.view?.page.leave) app.view.page.leave(app.view.state);
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.nav === (route.name === 'job' ? 'jobs' : route.name));
  }
  const root = $('#view');
  root.innerHTML = page.skeleton(route);
  delete root.dataset.ready;
  app.view = {page, route, root, data: null, state: page.init ? page.init(route) : {},
              html: new Map(), painted: false};
  document.title = `${page.title(route)} · Tessera`;
  window.scrollTo(0, 0);
  refresh();
}

// ---- what pages get ------------------------------------------------------------------------

function ctxFor(view) {
  return {
    me: app.me,
    route: view.route,
    state: view.state,
    samples: app.samples,
    // Whether the signed-in user may change this job: operators and admins any job, submitters
    // their own, viewers none.
    canAct(job) {
      const rank = kRoles.indexOf(app.me?.role);
      return rank >= 2 || (rank === 1 && job.user === app.me.user);
    },
    sawSummary,
    repaint: () => repaint(view),
    refresh: () => requestRefresh(true),
    // A POST on the user's behalf; resolves to {ok, body} or {ok: false, message}.
    async post(path, body) {
      try {
        return {ok: true, body: await api(path, {method: 'POST', body})};
      } catch (e) {
        if (e.status === 401) showSignIn(e);
        if (e.status === 403) return {ok: false, message: `Your role cannot do this. ${e.message}`};
        return {ok: false, message: e.message};
      }
    },
  };
}

function sawSummary(summary) {
  $('#version').textContent = summary.version ? `Tessera ${summary.version}` : '';
  showAlerts(summary.alerts || []);
  const now = Date.now();
  const last = app.samples[app.samples.length - 1];
  if (last && now - last.time < 1000) return;
  app.samples.push({time: now, queued: summary.tasks.queued, running: summary.tasks.running,
                    done_total: summary.tasks.done, workers_busy: summary.workers.busy,
                    workers_idle: summary.workers.idle,
                    workers_offline: summary.workers.offline});
  if (app.samples.length > kMaxSamples) app.samples.shift();
}

// ---- refreshing ----------------------------------------------------------------------------

function paint(view) {
  const regions = view.page.render(view.data, ctxFor(view));
  for (const [name, html] of Object.entries(regions)) {
    const el = view.root.querySelector(`[data-region="${name}"]`);
    if (!el || view.html.get(name) === html) continue;
    // Never replace a field the user is typing into; it is painted on the next refresh.
    const focused = document.activeElement;
    if (focused && focused !== document.body && el.contains(focused) &&
        focused.matches('input, select, textarea')) {
      continue;
    }
    el.innerHTML = html;
    view.html.set(name, html);
  }
  if (view.page.after) view.page.after(view.root, ctxFor(view));
  view.root.dataset.ready = view.page.name;
  if (!view.painted) {
    view.painted = true;
    // Navigation start to the first page with data on it (the end-to-end test reads this).
    if (!document.documentElement.dataset.firstPaintMs) {
      document.documentElement.dataset.firstPaintMs = performance.now().toFixed(0);
    }
  }
}

function repaint(view) {
  if (view === app.view && view.data) paint(view);
}

function paintError(view, error) {
  const what = view.page.describeError?.(error, view.route) ??
               {title: 'Something went wrong', body: esc(error.message)};
  view.root.innerHTML = emptyState(what.title, what.body, {icon: 'alert', cls: 'error'});
  view.html.clear();
  view.errored = true;
  view.root.dataset.ready = 'error';
}

async function refresh() {
  const view = app.view;
  if (!app.me || !view) return;
  if (app.refreshing) {
    app.again = true;
    return;
  }
  app.refreshing = true;
  app.lastRefresh = Date.now();
  try {
    const data = await view.page.load(view.route, ctxFor(view));
    if (view !== app.view) return;
    view.data = data;
    app.lastOk = Date.now();
    if (view.errored) {
      view.root.innerHTML = view.page.skeleton(view.route);
      view.errored = false;
    }
    hideBanner();
    paint(view);
  } catch (e) {
    if (view !== app.view) return;
    if (!(e instanceof ApiError)) {
      // A bug in the page, not an outage: say so instead of retrying.
      console.error(e);
      e = new ApiError(-1, 'internal', `the page failed: ${e.message}`);
    }
    if (e.status === 401) {
      showSignIn(e);
    } else if (e.transient) {
      showBanner(e);  // keep what the page shows; the next poll retries
    } else {
      paintError(view, e);
    }
  } finally {
    app.refreshing = false;
    if (app.again) {
      app.again = false;
      requestRefresh();
    }
  }
}

// Refreshes soon, but not more than twice a second however many events arrive.
function requestRefresh(now = false) {
  if (app.refreshTimer) {
    if (!now) return;
    clearTimeout(app.refreshTimer);
  }
  const wait = now ? 0 : Math.max(0, app.lastRefresh + kMinRefreshGapMs - Date.now());
  app.refreshTimer = setTimeout(() => {
    app.refreshTimer = null;
    refresh();
  }, wait);
}

function schedulePoll() {
  clearTimeout(live.pollTimer);
  const every = document.hidden ? kPollLiveMs : live.mode === 'live' ? kPollLiveMs : kPollMs;
  live.pollTimer = setTimeout(async () => {
    await refresh();
    schedulePoll();
  }, every);
}

// Whether an event from the stream changes what the current page shows.
function affects(event, route) {
  const d = event.data || {};
  switch (route.name) {
    case 'job':
      return event.kind !== 'worker' && (d.job_id == null || d.job_id === route.id);
    case 'jobs':
      return event.kind !== 'worker';
    case 'workers':
      return event.kind === 'worker' || event.kind === 'task';
    default:
      return true;
  }
}

function setLive(mode, why = '') {
  live.mode = mode;
  live.why = why;
  const el = $('#live');
  el.className = `live m-${mode}`;
  el.textContent = mode === 'live' ? 'Live' : mode === 'polling' ? 'Polling' : 'Connecting';
  el.title = mode === 'live' ? 'Updates stream from the scheduler as they happen'
                             : `Refreshing every ${kPollMs / 1000} s${why ? ` (${why})` : ''}`;
  schedulePoll();
}

async function connectEvents() {
  clearTimeout(live.retryTimer);
  live.controller?.abort();
  const controller = new AbortController();
  live.controller = controller;
  let retryMs = 3000;
  try {
    await followEvents({
      signal: controller.signal,
      lastEventId: live.lastEventId,
      onOpen: () => setLive('live'),
      onEvent: (event) => {
        if (event.id) live.lastEventId = event.id;
        if (app.view && affects(event, app.view.route)) requestRefresh();
      },
    });
    setLive('polling', 'the event stream ended');
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e.status === 401) return showSignIn(e);
    // A scheduler without the stream (404) or with all its streams taken (503): poll, and look
    // again now and then.
    if (e.status === 404) retryMs = 60000;
    else if (e.status === 503) retryMs = 30000;
    setLive('polling', e.status === 404 ? 'this scheduler has no event stream' : e.message);
  }
  if (controller === live.controller && app.me) {
    live.retryTimer = setTimeout(connectEvents, retryMs);
  }
}

function stopLive() {
  clearTimeout(live.pollTimer);
  clearTimeout(live.retryTimer);
  live.controller?.abort();
  live.controller = null;
}

// ---- banner, sign-in, header ---------------------------------------------------------------

function showBanner(error) {
  const what = error.status === 0 ? 'Cannot reach the scheduler.'
                                  : `The scheduler answered ${error.status}: ${error.message}.`;
  const since = app.lastOk
      ? ` Showing what it said at ${new Date(app.lastOk).toLocaleTimeString()}.` : '';
  const el = $('#banner');
  el.innerHTML = `<span class="pulse"></span>${esc(what)}${esc(since)} Retrying…`;
  el.hidden = false;
}

function hideBanner() {
  $('#banner').hidden = true;
}

// Farm-level alerts (a full outputs disk, a worker's full disk, ...): they clear by themselves
// once the scheduler sees the condition gone, and so does the banner.
function showAlerts(alerts) {
  const el = $('#alerts');
  const html = alerts.map((a) => `<div data-alert="${esc(a.key)}"><span class="pulse"></span>` +
      `<strong>${esc(a.kind.replace(/_/g, ' '))}</strong> ${esc(a.message)}</div>`).join('');
  if (el.innerHTML !== html) el.innerHTML = html;
  el.hidden = alerts.length === 0;
}

// Why the API refused, in the user's terms (the API's own words underneath).
function signInReason(error) {
  const m = error?.message || '';
  let why = 'This farm needs an API token to show its jobs.';
  if (token()) {
    if (/revoked/.test(m)) why = 'Your token was revoked. Ask an admin for a new one.';
    else if (/expired/.test(m)) why = 'Your token has expired. Ask an admin for a new one.';
    else if (/not known/.test(m)) why = 'This scheduler does not know that token.';
    else if (/not a Tessera/.test(m)) why = 'That is not a Tessera API token (they start tsra-).';
  }
  // The API's words help with a token that was refused, not with one that was never given.
  return `<b>${esc(why)}</b>${m && token() ? `<small>${esc(m)}</small>` : ''}`;
}

function showSignIn(error) {
  stopLive();
  app.me = null;
  if (app.view?.page.leave) app.view.page.leave(app.view.state);
  app.view = null;
  $('#view').innerHTML = '';
  $('#who').innerHTML = '';
  hideBanner();
  document.body.classList.add('signed-out');
  $('#signin-reason').innerHTML = signInReason(error);
  $('#signin').hidden = false;
  // A token the API refused is of no more use.
  if (token()) setToken('');
  $('#signin-token').focus();
}

function renderWho() {
  const me = app.me;
  if (me.auth === 'none') {
    $('#who').innerHTML = '<span class="open-farm" title="api.auth: none">Open farm</span>';
    return;
  }
  $('#who').innerHTML = `<span class="user">${esc(me.user)}</span>` +
                        `<span class="role r-${esc(me.role)}">${esc(me.role)}</span>` +
                        '<button type="button" class="link" id="signout">Sign out</button>';
}

async function signIn() {
  try {
    app.me = await api('/api/v1/whoami');
  } catch (e) {
    if (e.status === 401) return showSignIn(e);
    showBanner(e instanceof ApiError ? e : new ApiError(0, 'unreachable', e.message));
    setTimeout(signIn, kPollMs);
    return;
  }
  hideBanner();
  app.lastOk = Date.now();
  document.body.classList.remove('signed-out');
  $('#signin').hidden = true;
  renderWho();
  navigate();
  setLive('connecting');
  connectEvents();
}

// ---- wiring ----------------------------------------------------------------------------------

function wire() {
  addEventListener('hashchange', () => {
    if (adoptTokenFromUrl()) return signIn();
    navigate();
  });
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && app.me) requestRefresh(true);
    schedulePoll();
  });
  $('#signin-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    setToken($('#signin-token').value.trim());
    $('#signin-token').value = '';
    signIn();
  });
  $('#who').addEventListener('click', (ev) => {
    if (ev.target.id !== 'signout') return;
    setToken('');
    showSignIn(null);
  });
  const view = $('#view');
  view.addEventListener('click', (ev) => {
    const button = ev.target.closest('button[data-act]');
    if (button && app.view?.page.act) {
      ev.preventDefault();
      app.view.page.act(button.dataset.act, button, ctxFor(app.view));
      return;
    }
    // Whole table rows lead where their first link does.
    const row = ev.target.closest('tr[data-href]');
    if (row && !ev.target.closest('a, button, input')) location.hash = row.dataset.href;
  });
  view.addEventListener('submit', (ev) => {
    const form = ev.target.closest('form[data-act]');
    if (!form || !app.view?.page.act) return;
    ev.preventDefault();
    app.view.page.act(form.dataset.act, form, ctxFor(app.view));
  });
  // <details> toggles do not bubble: listen while capturing.
  view.addEventListener('toggle', (ev) => app.view?.page.toggle?.(ev.target, ctxFor(app.view)),
                        true);
}

wire();
adoptTokenFromUrl();
signIn();
