// Settings: the session's instructions, voice and server VAD (threshold, silence), shown as the
// server reports them (session.created, session.updated) and changed with a session.update. The
// page keeps no defaults of its own: until the first session.created the fields are empty, and a
// field left empty keeps the server's value.

import { channelOpen, send } from './channel.js';
import { $, clamp, timeOfDay } from './dom.js';

let session = null; // the latest session object the server reported
let edited = false; // the form was changed since the server's session was last shown in it
let chosen = false; // the user applied settings: they are applied again at the start of each call

function note(text) { $('settings-note').textContent = text; }

// The values in the form, clamped; a field left empty is absent.
function readSettings() {
  const out = {};
  const instructions = $('instructions').value.trim();
  if (instructions) out.instructions = instructions;
  const voice = $('voice').value.trim();
  if (voice) out.voice = voice;
  const threshold = parseFloat($('vad-threshold').value);
  if (Number.isFinite(threshold)) out.threshold = clamp(threshold, 0, 1);
  const silenceMs = parseInt($('silence-ms').value, 10);
  if (Number.isFinite(silenceMs)) out.silenceMs = clamp(silenceMs, 0, 10000);
  return out;
}

function turnDetectionOf(s) { return s?.audio?.input?.turn_detection ?? s?.turn_detection ?? null; }

// A GA session.update with the fields `s` holds.
function buildSessionUpdate(s) {
  const update = { type: 'realtime' };
  if (s.instructions !== undefined) update.instructions = s.instructions;
  const audio = {};
  if (s.voice !== undefined) audio.output = { voice: s.voice };
  if (s.threshold !== undefined || s.silenceMs !== undefined) {
    // A turn_detection object replaces the whole current one: start from what the server reported.
    const current = turnDetectionOf(session);
    const turn = current?.type === 'server_vad' ? { ...current } : { type: 'server_vad' };
    if (s.threshold !== undefined) turn.threshold = s.threshold;
    if (s.silenceMs !== undefined) turn.silence_duration_ms = s.silenceMs;
    audio.input = { turn_detection: turn };
  }
  if (Object.keys(audio).length) update.audio = audio;
  return { type: 'session.update', session: update };
}

// Put the server's session `s` (GA or beta shape) in the form; `onlyEmpty` keeps what the user typed.
function showSession(s, onlyEmpty = false) {
  const turn = turnDetectionOf(s);
  const values = {
    instructions: s.instructions,
    voice: s.audio?.output?.voice ?? s.voice,
    'vad-threshold': turn?.threshold,
    'silence-ms': turn?.silence_duration_ms,
  };
  for (const [id, value] of Object.entries(values)) {
    const field = $(id);
    if (onlyEmpty && field.value.trim()) continue;
    if (typeof value === 'string' || typeof value === 'number') field.value = String(value);
  }
}

/** The Apply button: send the form as a session.update, or keep it for the next call. */
export function applySettings(e) {
  e?.preventDefault();
  const s = readSettings();
  // Show the clamped values so the user sees what was actually sent.
  if (s.threshold !== undefined) $('vad-threshold').value = String(s.threshold);
  if (s.silenceMs !== undefined) $('silence-ms').value = String(s.silenceMs);
  chosen = true;
  if (send(buildSessionUpdate(s))) {
    note('Applying…');
  } else {
    edited = true;
    note('Saved — applied when the call connects');
  }
}

/** The user typed in the form. */
export function onSettingsEdited() {
  edited = true;
  note(channelOpen() ? 'Unsaved changes' : '');
}

/** session.created {session}: the call's session; the user's own settings, if any, are applied to it. */
export function onSessionCreated(ev) {
  session = ev.session || null;
  if (!session) return;
  if (chosen || edited) {
    showSession(session, true);
    applySettings();
  } else {
    showSession(session);
  }
}

/** session.updated {session}: what the server now uses. */
export function onSessionUpdated(ev) {
  session = ev.session || session;
  edited = false;
  if (ev.session) showSession(ev.session);
  note(`Applied ✓ ${timeOfDay()}`);
}
