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

const kBarWidth = 860;
const kBarHeight = 280;
const kBarPad = {left: 56, right: 12, top: 16, bottom: 28};

// Axis ticks for amounts that may be small (money): as many digits as the step needs.
function formatAmount(v) {
  if (v === 0 || v >= 10) return formatValue(v);
  return `${parseFloat(v.toPrecision(3))}`;
}

// One bar per entry, left to right. bars: [{label, value, title, current: bool (drawn in the
// accent colour)}]; format: a value as text (ticks); legend and note: HTML beside the title and
// under the chart; empty: the words drawn when every value is zero.
// Returns an <svg class="bar-chart"> that scales to its container's width.
export function barChart({title, bars, format = formatAmount, legend = '', note = '',
                          empty = 'Nothing yet'}) {
  const w = kBarWidth - kBarPad.left - kBarPad.right;
  const h = kBarHeight - kBarPad.top - kBarPad.bottom;
  const top = Math.max(0, ...bars.map((b) => b.value).filter((v) => Number.isFinite(v)));
  // Four grid steps of a round size above the largest value (at least 0.01 in all).
  const yMax = 4 * niceStep(Math.max(0.0025, top / 4), false);
  const y = (v) => kBarPad.top + h - (Math.max(0, v) / yMax) * h;
  const slot = bars.length ? w / bars.length : w;
  const barW = Math.max(2, Math.min(44, slot * 0.62));

  const parts = [];
  for (let i = 0; i <= 4; ++i) {
    const v = (yMax * i) / 4;
    const yy = y(v).toFixed(1);
    parts.push(`<line class="grid" x1="${kBarPad.left}" x2="${kBarPad.left + w}" y1="${yy}" ` +
               `y2="${yy}"/>`);
    parts.push(`<text class="tick" x="${kBarPad.left - 8}" y="${yy}" dy="4" text-anchor="end">` +
               `${esc(format(v))}</text>`);
  }
  bars.forEach((b, i) => {
    const cx = kBarPad.left + slot * (i + 0.5);
    const v = Number.isFinite(b.value) ? b.value : 0;
    const yy = y(v);
    const height = kBarPad.top + h - yy;
    if (v > 0) {
      // A bar too small to see still shows as a sliver.
      const shown = Math.max(2, height);
      parts.push(`<rect class="bar-day${b.current ? ' current' : ''}" ` +
                 `x="${(cx - barW / 2).toFixed(1)}" y="${(kBarPad.top + h - shown).toFixed(1)}" ` +
                 `width="${barW.toFixed(1)}" height="${shown.toFixed(1)}" rx="3"/>`);
    }
    // An invisible full-height target carries the tooltip, so a day without a bar has one too.
    parts.push(`<rect class="bar-hit" x="${(cx - slot / 2).toFixed(1)}" y="${kBarPad.top}" ` +
               `width="${slot.toFixed(1)}" height="${h}"><title>${esc(b.title ?? '')}</title>` +
               '</rect>');
    parts.push(`<text class="tick" x="${cx.toFixed(1)}" y="${kBarHeight - 8}" ` +
               `text-anchor="middle">${esc(b.label)}</text>`);
  });
  if (top === 0) {
    parts.push(`<text class="chart-note" x="${kBarPad.left + w / 2}" y="${kBarPad.top + h / 2}" ` +
               `text-anchor="middle">${esc(empty)}</text>`);
  }
  return `<figure class="chart-box"><figcaption><span class="chart-title">${esc(title)}</span>` +
         `<span class="legend">${legend}</span></figcaption>` +
         `<svg class="bar-chart" viewBox="0 0 ${kBarWidth} ${kBarHeight}" role="img" ` +
         `aria-label="${esc(title)}">${parts.join('')}</svg>` +
         (note ? `<p class="chart-foot">${note}</p>` : '') + '</figure>';
}

// A small chart of percentages (0..100) over time, for a table cell: one line per series, no
// axes; the points' gaps (null) break a line. series: [{label, color, values}].
export function sparkline({times, series, title = ''}) {
  const w = 120;
  const h = 28;
  const t0 = times.length ? times[0] : 0;
  const span = times.length > 1 ? times[times.length - 1] - t0 : 1;
  const x = (t) => (times.length > 1 ? ((t - t0) / span) * w : w);
  const y = (v) => h - 1 - (Math.min(100, Math.max(0, v)) / 100) * (h - 2);
  const paths = series.map((s) => {
    let d = '';
    let pen = false;
    times.forEach((t, k) => {
      const v = s.values[k];
      if (v == null || !Number.isFinite(v)) {
        pen = false;
        return;
      }
      d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    return d ? `<path d="${d}" fill="none" stroke="${s.color}" stroke-width="1.5" ` +
                   `stroke-linejoin="round"><title>${esc(s.label)}</title></path>` : '';
  });
  return `<svg class="sparkline" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" role="img" ` +
         `aria-label="${esc(title)}"><rect class="spark-bg" width="${w}" height="${h}"/>` +
         `${paths.join('')}</svg>`;
}
