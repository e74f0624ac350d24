// Latency readout: the voice-to-voice time of the latest turn (end of the caller's speech to the
// first reply audio), its average over the turns so far, and a table stage by stage. The stages,
// their order and their labels come from the server's gateway.latency event
// ({response_id, latency_ms: {name: ms | null}, stages: [{name, label}]}), the one list the
// server, the benchmarks and this page share (gateway.pipeline.latency.STAGES).

import { $, clamp, formatMs } from './dom.js';

const TOTAL = 'voice_to_voice'; // the stage that is the whole turn, also shown as the big number
const history = []; // voice_to_voice of the turns so far, ms

// The event's stages; from a server without them, its latency_ms keys, named as they are.
function stagesOf(ev, latency) {
  if (Array.isArray(ev.stages)) return ev.stages.filter((s) => typeof s?.name === 'string');
  return Object.keys(latency).map((name) => ({ name, label: name }));
}

function renderTable(stages, latency) {
  const values = stages.map(({ name }) => latency[name]).filter((v) => typeof v === 'number');
  const max = Math.max(1, ...values);
  const rows = stages.map(({ name, label }) => {
    const v = latency[name];
    const tr = document.createElement('tr');
    tr.dataset.stage = name;
    if (name === TOTAL) tr.className = 'total';
    const th = document.createElement('th');
    th.scope = 'row';
    const caption = document.createElement('span');
    caption.textContent = label || name;
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.setAttribute('aria-hidden', 'true');
    bar.style.setProperty('--w', typeof v === 'number' ? clamp(v / max, 0, 1).toFixed(3) : '0');
    th.append(caption, bar);
    const td = document.createElement('td');
    td.className = 'num';
    td.textContent = formatMs(v);
    tr.append(th, td);
    return tr;
  });
  $('latency-table').tBodies[0].replaceChildren(...rows);
}

/** Show the latency of the turn in a gateway.latency event. */
export function showLatency(ev) {
  const latency = ev.latency_ms || {};
  const v2v = latency[TOTAL];
  renderTable(stagesOf(ev, latency), latency);
  $('latency-v2v').textContent = formatMs(v2v);
  $('latency-v2v').classList.toggle('is-empty', typeof v2v !== 'number');
  if (typeof v2v === 'number') {
    history.push(v2v);
    const avg = history.reduce((a, b) => a + b, 0) / history.length;
    $('latency-avg').textContent = history.length > 1 ? `average ${formatMs(avg)} over ${history.length} turns` : '';
  }
  $('latency-turn').textContent = `· turn ${history.length || 1}`;
}
