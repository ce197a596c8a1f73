#pragma once
// The farm dashboard: one self-contained page that polls the JSON API (no build step, no
// external assets, so it works on an air-gapped farm).

namespace tessera::api {

inline constexpr const char* kDashboardHtml = R"html(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Tessera farm</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#111418;color:#e6e6e6}
 header{padding:14px 24px;background:#1b2027;display:flex;gap:24px;align-items:baseline}
 h1{font-size:18px;margin:0} h2{font-size:15px;margin:24px 0 8px}
 main{padding:0 24px 24px} .cards{display:flex;gap:12px;flex-wrap:wrap;margin-top:16px}
 .card{background:#1b2027;border-radius:8px;padding:10px 16px;min-width:120px}
 .card b{display:block;font-size:22px} table{border-collapse:collapse;width:100%}
 th,td{text-align:left;padding:6px 10px;border-bottom:1px solid #2a313a} th{color:#9aa4b1;font-weight:500}
 .bar{background:#2a313a;border-radius:4px;height:8px;width:160px;overflow:hidden}
 .bar i{display:block;height:100%;background:#4caf7d}
 .state-failed,.state-offline{color:#ef6b6b}.state-running,.state-busy{color:#f0c060}
 .state-done,.state-idle{color:#4caf7d}.state-canceled{color:#9aa4b1} #err{color:#ef6b6b}
</style></head><body>
<header><h1>Tessera</h1><span id="ver"></span><span id="err"></span></header>
<main>
<div class="cards" id="cards"></div>
<h2>Jobs</h2><table><thead><tr><th>ID</th><th>Name</th><th>State</th><th>Progress</th>
<th>Frames</th><th>Tasks done / total</th><th>Submitted</th></tr></thead><tbody id="jobs"></tbody></table>
<h2>Workers</h2><table><thead><tr><th>ID</th><th>Name</th><th>State</th><th>Cores</th>
<th>RAM</th><th>GPUs</th><th>Tasks</th><th>Last seen</th></tr></thead><tbody id="workers"></tbody></table>
</main>
<script>
const esc = s => String(s ?? '').replace(/[&<>"']/g, c => '&#' + c.charCodeAt(0) + ';');
const cell = v => '<td>' + esc(v) + '</td>';
const st = s => '<td class="state-' + esc(s) + '">' + esc(s) + '</td>';
async function get(p){ const r = await fetch(p); if(!r.ok) throw new Error(p + ': ' + r.status); return r.json(); }
async function refresh(){
  try {
    const [sum, jobs, workers] = await Promise.all([get('/api/v1/summary'), get('/api/v1/jobs?limit=50'), get('/api/v1/workers')]);
    document.getElementById('ver').textContent = 'v' + sum.version;
    const c = [['Running jobs', sum.jobs.running], ['Queued jobs', sum.jobs.queued], ['Done jobs', sum.jobs.done],
               ['Failed jobs', sum.jobs.failed], ['Tasks running', sum.tasks.running], ['Tasks queued', sum.tasks.queued],
               ['Workers busy', sum.workers.busy], ['Workers idle', sum.workers.idle], ['Workers offline', sum.workers.offline]];
    document.getElementById('cards').innerHTML = c.map(([k, v]) => '<div class="card">' + esc(k) + '<b>' + esc(v) + '</b></div>').join('');
    document.getElementById('jobs').innerHTML = jobs.jobs.map(j => '<tr>' + cell(j.id) + cell(j.name) + st(j.state) +
      '<td><div class="bar"><i style="width:' + Math.round(j.progress * 100) + '%"></i></div></td>' +
      cell(j.frame_start + '-' + j.frame_end) + cell(j.tasks.done + ' / ' + j.tasks.total) + cell(j.submitted_at) + '</tr>').join('');
    document.getElementById('workers').innerHTML = workers.workers.map(w => '<tr>' + cell(w.id) + cell(w.name) + st(w.state) +
      cell(w.cpu_cores) + cell(Math.round(w.ram_mb / 1024) + ' GiB') + cell(w.gpus.map(g => g.name).join(', ') || 'none') +
      cell(w.current_tasks.join(', ')) + cell(w.last_seen) + '</tr>').join('');
    document.getElementById('err').textContent = '';
  } catch (e) { document.getElementById('err').textContent = 'cannot reach the scheduler: ' + e.message; }
}
refresh(); setInterval(refresh, 2000);
</script></body></html>
)html";

}  // namespace tessera::api
