// Time-series charts as inline SVG (no library: the dashboard works on an air-gapped farm).

import {clockTime, esc} from './ui.js';

const kWidth = 640;
const kHeight = 220;
const kPad = {left: 44, right: 16, top: 16, bottom: 28};

// The smallest "nice" step (1, 2, 2.5, 5 x 10^k; no 2.5 for counts) at or above `value`.
function niceStep(value, integer) {
  const base = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of integer ? [1, 2, 5, 10] : [1, 2, 2.5, 5, 10]) {
    if (step * base >= value) return step * base;
  }
  return 10 * base;
}

function formatValue(v) {
  if (v >= 1000) return `${(v / 1000).toFixed(v >= 10000 ? 0 : 1)}k`;
  if (Number.isInteger(v) || v >= 100) return `${Math.round(v)}`;
  return `${parseFloat(v.toFixed(v >= 10 ? 1 : 2))}`;
}

// times: [ms since epoch]; series: [{label, color, values: [number], area: bool,
// integer: bool (counts: whole-number ticks)}].
// Returns an <svg class="chart"> that scales to its container's width.
export function timeChart({title, times, series, note = ''}) {
  // Gradient ids must be unique in the document; charts differ by title.
  const id = 'chart-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  const w = kWidth - kPad.left - kPad.right;
  const h = kHeight - kPad.top - kPad.bottom;
  const all = series.flatMap((s) => s.values).filter((v) => Number.isFinite(v));
  // Four grid steps of a round size above the largest value.
  const integer = series.every((s) => s.integer);
  const yMax = 4 * niceStep(Math.max(integer ? 1 : 0.25, Math.max(0, ...all) / 4), integer);
  const t0 = times.length ? times[0] : 0;
  const span = times.length > 1 ? times[times.length - 1] - t0 : 1;
  const x = (t) => kPad.left + (times.length > 1 ? ((t - t0) / span) * w : w);
  const y = (v) => kPad.top + h - (Math.max(0, v) / yMax) * h;

  const parts = [];
  parts.push('<defs>' + series.map((s, i) =>
      `<linearGradient id="${id}g${i}" x1="0" y1="0" x2="0" y2="1">` +
      `<stop offset="0" stop-color="${s.color}" stop-opacity=".35"/>` +
      `<stop offset="1" stop-color="${s.color}" stop-opacity="0"/></linearGradient>`).join('') +
      '</defs>');
  for (let i = 0; i <= 4; ++i) {
    const v = (yMax * i) / 4;
    const yy = y(v).toFixed(1);
    parts.push(`<line class="grid" x1="${kPad.left}" x2="${kPad.left + w}" y1="${yy}" y2="${yy}"/>`);
    parts.push(`<text class="tick" x="${kPad.left - 8}" y="${yy}" dy="4" text-anchor="end">` +
               `${formatValue(v)}</text>`);
  }
  if (times.length > 1) {
    const ticks = [t0, t0 + span / 2, t0 + span];
    ticks.forEach((t, i) => {
      const anchor = ['start', 'middle', 'end'][i];
      parts.push(`<text class="tick" x="${x(t).toFixed(1)}" y="${kHeight - 8}" ` +
                 `text-anchor="${anchor}">${esc(clockTime(t, span < 600000))}</text>`);
    });
  }
  series.forEach((s, i) => {
    const pts = times.map((t, k) => [x(t), y(s.values[k] ?? 0)]);
    if (!pts.length) return;
    const line = pts.map(([px, py], k) => `${k ? 'L' : 'M'}${px.toFixed(1)},${py.toFixed(1)}`)
                     .join('');
    if (s.area && pts.length > 1) {
      const base = (kPad.top + h).toFixed(1);
      parts.push(`<path d="${line}L${pts[pts.length - 1][0].toFixed(1)},${base}` +
                 `L${pts[0][0].toFixed(1)},${base}Z" fill="url(#${id}g${i})"/>`);
    }
    if (pts.length > 1) {
      parts.push(`<path d="${line}" fill="none" stroke="${s.color}" stroke-width="2" ` +
                 `stroke-linejoin="round" stroke-linecap="round"/>`);
    }
    const [lx, ly] = pts[pts.length - 1];
    parts.push(`<circle cx="${lx.toFixed(1)}" cy="${ly.toFixed(1)}" r="3.5" fill="${s.color}"/>`);
  });
  if (times.length < 2) {
    parts.push(`<text class="chart-note" x="${kPad.left + w / 2}" y="${kPad.top + h / 2}" ` +
               `text-anchor="middle">Collecting data…</text>`);
  }
  const legend = series.map((s) => {
    const last = s.values.length ? s.values[s.values.length - 1] : null;
    return `<span class="legend-item"><i style="background:${s.color}"></i>${esc(s.label)}` +
           `${last == null ? '' : ` <b>${esc(formatValue(last))}</b>`}</span>`;
  }).join('');
  return `<figure class="chart-box"><figcaption><span class="chart-title">${esc(title)}</span>` +
         `<span class="legend">${legend}</span></figcaption>` +
         `<svg class="chart" viewBox="0 0 ${kWidth} ${kHeight}" role="img" ` +
         `aria-label="${esc(title)}">${parts.join('')}</svg>` +
         (note ? `<p class="chart-foot">${esc(note)}</p>` : '') + '</figure>';
}
