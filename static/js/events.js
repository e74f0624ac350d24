// Incoming Realtime server events on the "oai-events" data channel: each is recorded in
// window.vg.events and the event log, then handed to the module that shows it.

import * as conversation from './conversation.js';
import { vg } from './handle.js';
import { showLatency } from './latency.js';
import { logEvent } from './log.js';
import { onSessionCreated, onSessionUpdated } from './settings.js';
import { setSpeaking, showError } from './status.js';

function onError(ev) {
  const err = ev.error || {};
  const code = err.code || err.type;
  showError(err.message || 'Unknown error', code ? `Gateway error (${code})` : 'Gateway error');
}

// Server event type -> handler(event). Events not listed are only logged.
const HANDLERS = {
  'session.created': onSessionCreated,
  'session.updated': onSessionUpdated,
  'error': onError,
  'input_audio_buffer.speech_started': conversation.onSpeechStarted,
  'input_audio_buffer.speech_stopped': conversation.onSpeechStopped,
  'input_audio_buffer.committed': conversation.onCommitted,
  'conversation.item.added': conversation.onItemAdded,
  'conversation.item.input_audio_transcription.delta': conversation.onTranscriptionDelta,
  'conversation.item.input_audio_transcription.completed': conversation.onTranscriptionCompleted,
  'conversation.item.input_audio_transcription.failed': conversation.onTranscriptionFailed,
  'response.created': conversation.onResponseCreated,
  'response.output_item.added': conversation.onOutputItemAdded,
  'response.output_audio_transcript.delta': conversation.onAssistantDelta,
  'response.output_text.delta': conversation.onAssistantDelta,
  'response.output_audio_transcript.done': conversation.onAssistantDone,
  'response.output_text.done': conversation.onAssistantDone,
  'output_audio_buffer.started': () => setSpeaking('assistant', true),
  'output_audio_buffer.stopped': () => setSpeaking('assistant', false),
  'output_audio_buffer.cleared': conversation.onAudioCleared,
  'response.done': conversation.onResponseDone,
  'gateway.latency': (ev) => { showLatency(ev); conversation.noteReplyLatency(ev); },
};

/** One data channel message (`data`: the JSON text of a server event). */
export function onServerMessage(data) {
  let ev;
  try { ev = JSON.parse(data); } catch { console.warn('non-JSON data channel message', data); return; }
  vg.events.push(ev);
  logEvent(ev.type, 'in');
  const handler = HANDLERS[ev.type];
  if (!handler) return;
  try { handler(ev); } catch (err) { console.error('handler failed for', ev.type, err); }
}
