// Event log (the debug panel): one row per Realtime event on the data channel. Consecutive events
// of the same type and direction collapse into one row with a counter, so streams of deltas stay
// readable.

import { $ } from './dom.js';

const MAX_LOG_ENTRIES = 200;

/** Log an event: `type` is its Realtime type, `dir` 'in' (from the server) or 'out' (to it). */
export function logEvent(type, dir) {
  const list = $('event-list');
  const last = list.lastElementChild;
  if (last && last.dataset.type === type && last.dataset.dir === dir) {
    const n = Number(last.dataset.count) + 1;
    last.dataset.count = String(n);
    last.querySelector('.count').textContent = `×${n}`;
    return;
  }
  const li = document.createElement('li');
  li.dataset.type = type;
  li.dataset.dir = dir;
  li.dataset.count = '1';
  const arrow = document.createElement('span');
  arrow.className = 'dir';
  arrow.textContent = dir === 'in' ? '←' : '→';
  arrow.title = dir === 'in' ? 'from server' : 'to server';
  const name = document.createElement('span');
  name.className = 'type';
  name.textContent = type;
  const count = document.createElement('span');
  count.className = 'count';
  li.append(arrow, name, count);
  list.append(li);
  while (list.children.length > MAX_LOG_ENTRIES) list.firstElementChild.remove();
  if ($('event-log').open) list.scrollTop = list.scrollHeight;
}
