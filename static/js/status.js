// What the page says about the call: the status line, which buttons are usable, the error
// banner and the speaking indicators.

import { channelOpen } from './channel.js';
import { $ } from './dom.js';
import { vg } from './handle.js';
import { microphoneStream } from './microphone.js';

export const STATUS_TEXT = {
  idle: 'Idle — press Connect to start a call',
  connecting: 'Connecting…',
  connected: 'Connected — just start talking',
  busy: 'All lines busy',
  failed: 'Connection failed',
  disconnected: 'Disconnected — the call has ended',
  error: 'Error',
};

// States in which a call (or an attempt at one) is in progress.
export const ACTIVE_STATES = new Set(['connecting', 'busy', 'connected']);

/** Enter call state `state` (a STATUS_TEXT key), with `text` instead of its usual wording. */
export function setState(state, text) {
  vg.state = state;
  $('status').dataset.state = state;
  document.body.dataset.state = state;
  $('status-text').textContent = text || STATUS_TEXT[state] || state;
  updateControls();
}

export function setStatusText(text) { $('status-text').textContent = text; }

export function updateControls() {
  const active = ACTIVE_STATES.has(vg.state);
  $('connect').disabled = active;
  $('hangup').disabled = !active;
  $('cancel-retry').hidden = vg.state !== 'busy';
  $('mute').disabled = !microphoneStream();
  const open = channelOpen();
  $('text-input').disabled = !open;
  $('send-text').disabled = !open;
  $('text-input').placeholder = open ? 'Type a message…' : 'Connect to send a message';
}

/** The dismissible error banner (gateway errors and local problems such as microphone access). */
export function showError(message, title = 'Something went wrong') {
  $('error-title').textContent = title;
  $('error-message').textContent = message || '';
  $('error-banner').hidden = false;
}

export function hideError() { $('error-banner').hidden = true; }

/** Light up (or dim) the speaking indicator of `who`: 'user' or 'assistant'. */
export function setSpeaking(who, active) {
  const el = $(who === 'user' ? 'speaker-user' : 'speaker-assistant');
  el.dataset.active = String(active);
  el.querySelector('.speaker-state').textContent = active ? 'speaking' : 'silent';
}
