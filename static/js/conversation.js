// The conversation as the Realtime server events tell it, drawn as transcript lines: one user
// line per user item (a spoken one from its speech_started or its commit, a typed one when it is
// sent) and one assistant line per response. Lines are found by the ids the events carry
// (item_id, response_id), never by position, and each line is placed after the item the server
// says precedes it (previous_item_id), so every transcript shows, in conversation order, however
// the caller's pauses interleave speech, transcripts and replies.

import { formatMs } from './dom.js';
import { setSpeaking } from './status.js';
import {
  addLine, appendText, lineForItem, lineForResponse, placeAfterItem, removeLine, setItemId, setLatencyNote,
  setStatus, setText, unclaimedUserLines,
} from './transcript.js';

let lastAssistant = null; // the latest assistant line, for events without a response_id

// The user line of item `itemId`: its own line, else the oldest one that waits for words with no
// item yet (a server that left item_id out of speech_started), else a new one at the end.
function userLine(itemId) {
  let el = lineForItem(itemId);
  if (el) return el;
  el = unclaimedUserLines()[0] || addLine('user');
  setItemId(el, itemId);
  return el;
}

function findUserLine(itemId) { return lineForItem(itemId) || unclaimedUserLines()[0] || null; }

/** input_audio_buffer.speech_started {item_id, audio_start_ms}: the caller is talking. */
export function onSpeechStarted(ev) {
  setSpeaking('user', true);
  if (ev.item_id) { userLine(ev.item_id); return; }
  // No id: reuse an empty waiting line at the end rather than stack "listening…" lines.
  const last = unclaimedUserLines().at(-1);
  const reusable = last && !last.textContent && !last.nextElementSibling;
  setStatus(reusable ? last : addLine('user'), 'listening');
}

/** input_audio_buffer.speech_stopped {item_id, audio_end_ms}. */
export function onSpeechStopped(ev) {
  setSpeaking('user', false);
  const el = findUserLine(ev.item_id);
  if (el?.dataset.status === 'listening') setStatus(el, 'transcribing');
}

/** input_audio_buffer.committed {item_id, previous_item_id}: the caller's audio became a user
 * item (also without speech_started: a manual commit, an idle timeout). */
export function onCommitted(ev) {
  const el = userLine(ev.item_id);
  if (el.dataset.status === 'listening') setStatus(el, 'transcribing');
  placeAfterItem(el, ev.previous_item_id);
}

/** conversation.item.added {previous_item_id, item}: keep the item's line in conversation order. */
export function onItemAdded(ev) {
  const el = lineForItem(ev.item?.id);
  if (el) placeAfterItem(el, ev.previous_item_id);
}

/** conversation.item.input_audio_transcription.delta {item_id, delta}. */
export function onTranscriptionDelta(ev) {
  const el = userLine(ev.item_id);
  appendText(el, ev.delta);
  setStatus(el, 'partial');
}

/** conversation.item.input_audio_transcription.completed {item_id, transcript}: the line shows
 * exactly the transcript; an empty one (a VAD false positive: nothing was said) has no line. */
export function onTranscriptionCompleted(ev) {
  const el = userLine(ev.item_id);
  if (typeof ev.transcript === 'string') setText(el, ev.transcript.trim());
  if (!el.textContent) removeLine(el);
  else setStatus(el, 'done');
}

/** conversation.item.input_audio_transcription.failed {item_id, error}. */
export function onTranscriptionFailed(ev) {
  const el = findUserLine(ev.item_id);
  if (el) setStatus(el, 'failed');
}

/** A message the caller typed, sent as conversation item `itemId`. */
export function addTypedLine(text, itemId) {
  const el = addLine('user', text);
  el.dataset.source = 'text';
  setItemId(el, itemId);
  return el;
}

function findAssistantLine(responseId) {
  if (responseId) return lineForResponse(responseId);
  return lastAssistant?.isConnected ? lastAssistant : null;
}

// The line of response `responseId`, made (at the end, "thinking…") if there is none yet.
function assistantLine(responseId) {
  let el = findAssistantLine(responseId);
  if (!el) {
    el = addLine('assistant');
    if (responseId) el.dataset.responseId = responseId;
  }
  lastAssistant = el;
  return el;
}

/** response.created {response}. */
export function onResponseCreated(ev) { assistantLine(ev.response?.id); }

/** response.output_item.added {response_id, item}: the response's line is that item's line. */
export function onOutputItemAdded(ev) {
  const el = assistantLine(ev.response_id);
  if (!el.dataset.itemId) setItemId(el, ev.item?.id);
}

/** response.output_audio_transcript.delta / response.output_text.delta {response_id, item_id, delta}. */
export function onAssistantDelta(ev) {
  const el = assistantLine(ev.response_id);
  if (!el.dataset.itemId) setItemId(el, ev.item_id);
  appendText(el, ev.delta);
}

/** response.output_audio_transcript.done {transcript} / response.output_text.done {text}. */
export function onAssistantDone(ev) {
  const full = ev.type === 'response.output_text.done' ? ev.text : ev.transcript;
  const el = assistantLine(ev.response_id);
  if (typeof full === 'string' && full) setText(el, full);
}

/** output_audio_buffer.cleared {response_id}: the caller barged in; the rest of this reply will
 * never be heard. */
export function onAudioCleared(ev) {
  setSpeaking('assistant', false);
  const el = findAssistantLine(ev.response_id);
  if (el) setStatus(el, 'interrupted');
}

/** response.done {response: {id, status}}. */
export function onResponseDone(ev) {
  const response = ev.response || {};
  const el = findAssistantLine(response.id);
  if (!el) return;
  const status = response.status;
  if (status === 'cancelled') setStatus(el, 'interrupted');
  else if (status === 'failed' || status === 'incomplete') setStatus(el, status);
  else if (el.dataset.status !== 'interrupted') setStatus(el, 'done');
  // A reply with no words is just noise: completed (e.g. a tool-less no-op), or cancelled before
  // it said anything (the gateway began to answer in a pause and the caller went on).
  if (!el.textContent && (el.dataset.status === 'done' || el.dataset.status === 'interrupted')) removeLine(el);
}

/** gateway.latency {response_id, latency_ms}: "replied in …" on the reply's line. */
export function noteReplyLatency(ev) {
  const v2v = ev.latency_ms?.voice_to_voice;
  const el = findAssistantLine(ev.response_id);
  if (el && typeof v2v === 'number') setLatencyNote(el, `replied in ${formatMs(v2v)}`);
}
