// The conversation panel: one line per conversation item, plus dividers for the call's start and
// end. A line's textContent is exactly the spoken or typed text; its label and status tag are CSS
// generated content driven by data-* attributes (data-status, data-tag), so screen readers and
// tests read clean text. The line of a conversation item carries data-item-id; an assistant line
// also data-response-id. The DOM is the only record of which line shows which item.

import { $ } from './dom.js';

const TAGS = {
  user: { listening: 'listening…', transcribing: 'transcribing…', partial: '…', failed: 'transcription failed' },
  assistant: { thinking: 'thinking…', streaming: 'replying…', interrupted: 'interrupted', failed: 'failed', incomplete: 'incomplete' },
};

// Statuses of a line still being produced: "replied in …" would contradict "replying…".
const IN_PROGRESS = new Set(['listening', 'transcribing', 'partial', 'thinking', 'streaming']);

function transcriptEl() { return $('transcript'); }

// Keep the view pinned to the bottom only if the user hasn't scrolled up.
function withAutoScroll(fn) {
  const t = transcriptEl();
  const pinned = t.scrollHeight - t.scrollTop - t.clientHeight < 60;
  const out = fn();
  if (pinned) t.scrollTop = t.scrollHeight;
  return out;
}

function lineWith(attribute, value) {
  if (!value) return null;
  return transcriptEl().querySelector(`.msg[${attribute}="${CSS.escape(value)}"]`);
}

/** The line of conversation item `itemId`, or null. */
export function lineForItem(itemId) { return lineWith('data-item-id', itemId); }

/** The assistant line of response `responseId`, or null. */
export function lineForResponse(responseId) { return lineWith('data-response-id', responseId); }

/** The user lines still waiting for words and not yet tied to an item, oldest first. */
export function unclaimedUserLines() {
  return [...transcriptEl().querySelectorAll('.msg.user:not([data-item-id])')]
    .filter((el) => el.dataset.status === 'listening' || el.dataset.status === 'transcribing');
}

/** Tie `el` to conversation item `itemId` (no-op without an id). */
export function setItemId(el, itemId) { if (itemId) el.dataset.itemId = itemId; }

/** Append a line for `role` ('user' or 'assistant') at the end of the conversation; with `text`
 * it is finished ('done'), without it waits for words ('listening' / 'thinking'). */
export function addLine(role, text = '') {
  return withAutoScroll(() => {
    $('empty-hint').hidden = true;
    const el = document.createElement('div');
    el.className = `msg ${role}`;
    el.textContent = text;
    el.dataset.status = text ? 'done' : (role === 'user' ? 'listening' : 'thinking');
    renderTag(el);
    transcriptEl().append(el);
    return el;
  });
}

/** Move `el` right after the line of item `previousItemId` (conversation order), unless it is
 * there already; nothing happens when that item has no line (e.g. the transcript was cleared). */
export function placeAfterItem(el, previousItemId) {
  const previous = lineForItem(previousItemId);
  if (!previous || previous === el) return;
  let before = el.previousElementSibling;
  while (before && !before.matches('.msg[data-item-id]')) before = before.previousElementSibling;
  if (before !== previous) withAutoScroll(() => previous.after(el));
}

export function addDivider(text, kind = 'start') {
  withAutoScroll(() => {
    $('empty-hint').hidden = true;
    const el = document.createElement('div');
    el.className = 'divider';
    el.dataset.kind = kind;
    el.textContent = text;
    transcriptEl().append(el);
  });
}

export function removeLine(el) { el.remove(); }

export function appendText(el, delta) {
  if (typeof delta !== 'string' || !delta) return;
  withAutoScroll(() => { el.textContent += delta; });
  if (el.classList.contains('assistant') && el.dataset.status === 'thinking') setStatus(el, 'streaming');
}

export function setText(el, text) { withAutoScroll(() => { el.textContent = text; }); }

/** Set a line's status: a TAGS key of its role, or 'done'. */
export function setStatus(el, status) {
  el.dataset.status = status;
  el.classList.toggle('interrupted', status === 'interrupted');
  renderTag(el);
}

/** Show `text` (e.g. "replied in 812 ms") in the line's tag once it is finished. */
export function setLatencyNote(el, text) {
  el.dataset.latency = text;
  renderTag(el);
}

function renderTag(el) {
  const role = el.classList.contains('user') ? 'user' : 'assistant';
  const parts = [];
  const tag = TAGS[role][el.dataset.status];
  if (tag) parts.push(tag);
  if (el.dataset.latency && !IN_PROGRESS.has(el.dataset.status)) parts.push(el.dataset.latency);
  if (parts.length) el.dataset.tag = parts.join(' · ');
  else delete el.dataset.tag;
}

/** On hang-up nothing more will arrive: drop empty lines and clear "in progress" tags so the
 * transcript reads as a finished conversation. */
export function finalizeOpenLines() {
  for (const el of transcriptEl().querySelectorAll('.msg')) {
    const s = el.dataset.status;
    if (!el.textContent && s !== 'interrupted') removeLine(el);
    else if (IN_PROGRESS.has(s)) setStatus(el, 'done');
  }
}

export function clearTranscript() {
  for (const el of [...transcriptEl().children]) if (el.id !== 'empty-hint') el.remove();
  $('empty-hint').hidden = false;
}
