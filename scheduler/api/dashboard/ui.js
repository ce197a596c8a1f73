// Small HTML helpers shared by the pages. Every value from the API goes through esc().

export function esc(value) {
  return String(value ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

export function plural(n, word, many = word + 's') {
  return `${n} ${n === 1 ? word : many}`;
}

// A state as a coloured pill: queued, running, paused, done, failed, canceled, idle, busy,
// offline.
export function badge(state) {
  return `<span class="badge s-${esc(state)}">${esc(state)}</span>`;
}

// A progress bar; `label` goes beside it.
export function bar(done, total, {label = true, cls = ''} = {}) {
  const pct = total > 0 ? Math.min(100, (100 * done) / total) : 0;
  const text = label ? `<span class="bar-label">${done}/${total}</span>` : '';
  return `<span class="bar-wrap ${cls}"><span class="bar" role="progressbar" aria-valuemin="0" ` +
         `aria-valuemax="${total}" aria-valuenow="${done}"><i style="width:${pct.toFixed(1)}%">` +
         `</i></span>${text}</span>`;
}

export function frameRange(first, last) {
  return first === last ? `${first}` : `${first}–${last}`;
}

// "just now", "12 s ago", "5 min ago", "3 h ago", "2 d ago".
export function ago(iso, now = Date.now()) {
  if (!iso) return '—';
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 2) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// A timestamp shown relative, with the exact local time on hover.
export function when(iso, now) {
  if (!iso) return '<span class="muted">—</span>';
  const exact = new Date(iso).toLocaleString();
  return `<time datetime="${esc(iso)}" title="${esc(exact)}">${esc(ago(iso, now))}</time>`;
}

// A timestamp that may lie ahead (a deadline, a forecast) as a short local date and time
// ("Jun 3, 14:05"), the exact local time on hover.
export function at(iso) {
  if (!iso) return '<span class="muted">—</span>';
  const d = new Date(iso);
  const short = d.toLocaleString([], {month: 'short', day: 'numeric', hour: '2-digit',
                                      minute: '2-digit'});
  return `<time datetime="${esc(iso)}" title="${esc(d.toLocaleString())}">${esc(short)}</time>`;
}

// Whether a deadline holds, as a pill: "on time" or "LATE".
export function verdict(onTime, title = '') {
  const hint = title ? ` title="${esc(title)}"` : '';
  return onTime ? `<span class="badge verdict s-done"${hint}>on time</span>`
                : `<span class="badge verdict s-failed"${hint}>LATE</span>`;
}

// A time of day; with seconds when `seconds` (axes spanning a few minutes).
export function clockTime(ms, seconds = false) {
  const fields = {hour: '2-digit', minute: '2-digit'};
  if (seconds) fields.second = '2-digit';
  return new Date(ms).toLocaleTimeString([], fields);
}

// Megabytes as "512 MB" / "31.5 GB".
export function megabytes(mb) {
  if (!mb) return '—';
  if (mb < 1024) return `${mb} MB`;
  const gb = mb / 1024;
  return `${gb >= 100 ? Math.round(gb) : gb.toFixed(1).replace(/\.0$/, '')} GB`;
}

// Money in the farm's currency (prices are configuration, so no symbol): two decimals, four
// below 1 so a short task's share does not show as 0.00.
export function money(amount) {
  const n = Number(amount) || 0;
  return n.toFixed(Math.abs(n) >= 1 || n === 0 ? 2 : 4);
}

// GPU-seconds as a duration: "0 s", "< 1 s", "12 min 3 s", "5 h 2 min".
export function gpuTime(seconds) {
  const s = Number(seconds) || 0;
  if (s > 0 && s < 0.5) return '< 1 s';
  return duration(s * 1000);
}

export function duration(ms) {
  if (ms == null || ms < 0) return '—';
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

// A friendly box for "nothing here yet" and for errors that replace a whole page.
export function emptyState(title, body, {icon = 'tiles', cls = ''} = {}) {
  const icons = {
    tiles: '<rect x="6" y="6" width="16" height="16" rx="3"/><rect x="26" y="6" width="16" ' +
           'height="16" rx="3"/><rect x="6" y="26" width="16" height="16" rx="3"/>' +
           '<rect x="26" y="26" width="16" height="16" rx="3" stroke-dasharray="3 3"/>',
    alert: '<circle cx="24" cy="24" r="18"/><path d="M24 14v12M24 32v1"/>',
    server: '<rect x="8" y="8" width="32" height="12" rx="3"/><rect x="8" y="28" width="32" ' +
            'height="12" rx="3"/><path d="M14 14h1M14 34h1"/>',
  };
  return `<div class="empty ${cls}"><svg viewBox="0 0 48 48" width="56" height="56" ` +
         `aria-hidden="true">${icons[icon] || icons.tiles}</svg><h2>${title}</h2>` +
         `<p>${body}</p></div>`;
}

// Counts by state as small chips ("3 running", "1 failed"), zeros left out unless `all`.
export function stateCounts(counts, order, {all = false} = {}) {
  return order.filter((s) => all || counts[s] > 0)
      .map((s) => `<span class="count s-${s}"><b>${counts[s] ?? 0}</b> ${s}</span>`)
      .join('');
}
