// The call: open the microphone, build the RTCPeerConnection (microphone track + "oai-events"
// data channel), offer it to the gateway (retrying while all lines are busy), play the answer's
// audio track, and tear it all down on hang-up or failure.

import { $, timeOfDay } from './dom.js';
import { onServerMessage } from './events.js';
import { vg } from './handle.js';
import { startLevelMeter, stopLevelMeter } from './meter.js';
import { describeMicError, microphoneStream, openMicrophone, stopMicrophone, useMicrophone } from './microphone.js';
import { deleteCall, GatewayError, postOffer, waitForIceGathering } from './signaling.js';
import { ACTIVE_STATES, hideError, setSpeaking, setState, setStatusText, showError, STATUS_TEXT, updateControls } from './status.js';
import { addDivider, finalizeOpenLines } from './transcript.js';

const ICE_GATHER_TIMEOUT_MS = 5000; // aiortc needs all candidates in the offer
const CONNECT_TIMEOUT_MS = 20000;   // browsers take ~30 s to declare ICE failed

// Per-call resources.
const res = {
  abort: null, retryTimer: 0, connectTimer: 0, attempts: 0,
  inCall: false, // the data channel opened at least once (for the transcript divider)
};

// Every connect/hang-up bumps the generation; async continuations compare it
// to bail out when the user hung up (or re-dialled) while they were awaiting.
let generation = 0;

/** The Connect button. */
export async function connect() {
  if (ACTIVE_STATES.has(vg.state)) return;
  const gen = ++generation;
  hideError();
  res.attempts = 0;
  if (!window.RTCPeerConnection) {
    setState('error', 'This browser does not support WebRTC');
    showError('RTCPeerConnection is not available in this browser.', 'WebRTC unavailable');
    return;
  }
  setState('connecting', 'Requesting microphone…');
  let stream;
  try {
    stream = await openMicrophone();
  } catch (err) {
    if (gen !== generation) return;
    setState('error', 'Microphone unavailable');
    showError(describeMicError(err), 'Microphone unavailable');
    return;
  }
  if (gen !== generation) { stream.getTracks().forEach((t) => t.stop()); return; }
  useMicrophone(stream);
  updateControls();
  startLevelMeter(stream);
  await dial(gen);
}

// One signalling attempt; a 503 schedules another one with a fresh peer.
async function dial(gen) {
  res.attempts += 1;
  setState('connecting', res.attempts > 1 ? `Connecting… (attempt ${res.attempts})` : 'Connecting…');
  const pc = createPeerConnection(gen);
  try {
    await pc.setLocalDescription(await pc.createOffer());
    setStatusText('Gathering network candidates…');
    await waitForIceGathering(pc, ICE_GATHER_TIMEOUT_MS);
    if (gen !== generation) return;
    setStatusText('Calling the gateway…');
    res.abort = new AbortController();
    const result = await postOffer(pc.localDescription, res.abort.signal);
    if (gen !== generation) return;
    if (result.busy) {
      closePeer();
      scheduleRetry(gen, result.retryAfter);
      return;
    }
    const { answer } = result;
    vg.callId = answer.call_id || null;
    await pc.setRemoteDescription({ type: 'answer', sdp: answer.sdp });
    if (gen !== generation) return;
    setStatusText('Establishing audio…');
    res.connectTimer = setTimeout(() => {
      if (gen !== generation || vg.state !== 'connecting') return;
      endCall('failed', 'Connection failed — timed out establishing audio');
      showError('The gateway answered but no audio connection could be established. A firewall or VPN may be blocking UDP traffic.', 'Connection failed');
    }, CONNECT_TIMEOUT_MS);
  } catch (err) {
    if (gen !== generation) return; // aborted by hang-up: nothing to report
    const msg = err instanceof GatewayError ? err.message
      : err?.name === 'TypeError' ? 'Could not reach the gateway. Is the server running?'
      : err?.message || String(err);
    endCall('error', 'Could not connect');
    showError(msg, 'Could not connect');
  }
}

function scheduleRetry(gen, seconds) {
  let remaining = seconds;
  const show = () => setState('busy', `All lines busy — retrying in ${remaining} s`);
  show();
  res.retryTimer = setInterval(() => {
    if (gen !== generation) { clearInterval(res.retryTimer); return; }
    remaining -= 1;
    if (remaining > 0) { show(); return; }
    clearInterval(res.retryTimer);
    res.retryTimer = 0;
    dial(gen);
  }, 1000);
}

function createPeerConnection(gen) {
  // No ICE servers: the gateway is reached directly (LAN / localhost) and
  // STUN would only slow down gathering on an offline network.
  const pc = new RTCPeerConnection();
  vg.pc = pc;
  const stream = microphoneStream();
  for (const track of stream.getAudioTracks()) pc.addTrack(track, stream);
  // The Realtime API needs the channel in the offer, so create it first.
  const dc = pc.createDataChannel('oai-events');
  vg.dc = dc;
  // A retry after 503 builds a new peer within the same generation, so the
  // handlers also check they still belong to the current peer.
  const current = () => gen === generation && vg.pc === pc;
  dc.addEventListener('open', () => { if (current()) onChannelOpen(); });
  dc.addEventListener('message', (e) => { if (current()) onServerMessage(e.data); });
  dc.addEventListener('close', () => {
    // Closing the channel is how the server ends a call (or it went away).
    if (current() && (vg.state === 'connected' || vg.state === 'connecting')) endCall('disconnected');
  });
  pc.addEventListener('track', (e) => { if (current()) onRemoteTrack(e); });
  const onConnState = () => { if (current()) onConnectionState(pc); };
  pc.addEventListener('connectionstatechange', onConnState);
  pc.addEventListener('iceconnectionstatechange', onConnState); // Firefox < 113 lacks connectionState
  return pc;
}

function onConnectionState(pc) {
  const states = [pc.connectionState, pc.iceConnectionState];
  if (states.includes('failed')) {
    endCall('failed', 'Connection failed — no network path to the gateway (ICE)');
    showError('The audio connection could not be established or was lost. A firewall or VPN may be blocking UDP traffic.', 'Connection failed');
  } else if (vg.state === 'connected' && states.includes('disconnected')) {
    setStatusText('Connection unstable — trying to recover…');
  } else if (vg.state === 'connected' && pc.iceConnectionState !== 'disconnected') {
    setStatusText(STATUS_TEXT.connected);
  }
}

function onRemoteTrack(e) {
  const audio = $('remote-audio');
  audio.srcObject = e.streams?.[0] || new MediaStream([e.track]);
  audio.play().catch((err) => {
    if (err?.name !== 'NotAllowedError') return;
    // Autoplay policy: the next click anywhere counts as a user gesture.
    showError('Your browser blocked audio playback. Click anywhere on the page to hear the assistant.', 'Audio blocked');
    document.addEventListener('click', () => { audio.play().catch(() => {}); hideError(); }, { once: true });
  });
}

// The user's settings, if any, are sent once session.created says what the call starts with.
function onChannelOpen() {
  clearTimeout(res.connectTimer);
  res.inCall = true;
  setState('connected');
  addDivider(`Call started · ${timeOfDay()}`);
  $('text-input').focus({ preventScroll: true });
}

function closePeer() {
  try { vg.dc?.close(); } catch { /* already closed */ }
  try { vg.pc?.close(); } catch { /* already closed */ }
  vg.dc = null;
  vg.pc = null;
}

// Tear everything down and land in `state` (idle after a hang-up, or a
// terminal state the user should see: failed / disconnected / error).
function endCall(state, text) {
  generation += 1; // invalidate every pending callback of this call
  clearInterval(res.retryTimer);
  clearTimeout(res.connectTimer);
  res.retryTimer = 0;
  res.abort?.abort();
  res.abort = null;
  if (vg.callId) deleteCall(vg.callId);
  vg.callId = null;
  closePeer();
  stopLevelMeter();
  stopMicrophone();
  $('remote-audio').srcObject = null;
  setSpeaking('user', false);
  setSpeaking('assistant', false);
  finalizeOpenLines();
  if (res.inCall) addDivider(`Call ended · ${timeOfDay()}`, 'end');
  res.inCall = false;
  setState(state, text);
}

/** The Hang up (and Cancel) button. */
export function hangup() { endCall('idle'); }

/** The tab goes away: free the line now instead of waiting for the server to notice the dead peer. */
export function onPageHide() {
  if (vg.callId) deleteCall(vg.callId);
  vg.pc?.close();
}
