// Voice Gateway demo page: the entry point (loaded as <script type="module">).
//
// The page owns the whole WebRTC call (call.js): it opens the microphone, builds the
// RTCPeerConnection (microphone track + "oai-events" data channel), POSTs a complete
// (non-trickle) offer to /offer and plays the answer's audio track. The data channel speaks the
// OpenAI Realtime event protocol (events.js); everything the user sees — the conversation
// (conversation.js, transcript.js), the speaking indicators (status.js), the latency (latency.js),
// the settings (settings.js) and the event log (log.js) — is driven by those events.
//
// No framework and no build step on purpose: these files are served as they are.

import { connect, hangup, onPageHide } from './call.js';
import { send } from './channel.js';
import { sendText } from './composer.js';
import { $ } from './dom.js';
import { vg } from './handle.js';
import { toggleMute } from './microphone.js';
import { applySettings, onSettingsEdited } from './settings.js';
import { hideError, setState } from './status.js';
import { clearTranscript } from './transcript.js';

function init() {
  $('connect').addEventListener('click', connect);
  $('hangup').addEventListener('click', hangup);
  $('cancel-retry').addEventListener('click', hangup);
  $('mute').addEventListener('click', toggleMute);
  $('error-dismiss').addEventListener('click', hideError);
  $('text-form').addEventListener('submit', sendText);
  $('settings-form').addEventListener('submit', applySettings);
  $('settings-form').addEventListener('input', onSettingsEdited);
  $('clear-transcript').addEventListener('click', clearTranscript);
  window.addEventListener('pagehide', onPageHide);
  setState('idle');
  vg.send = send; // handy from devtools: vg.send({type: 'response.create'})
}

init();
