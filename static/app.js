// Voice Gateway demo page.
//
// The page owns the whole WebRTC call: it opens the microphone, builds the
// RTCPeerConnection (mic track + "oai-events" data channel), POSTs a complete
// (non-trickle) offer to /offer and plays the answer's audio track.  The data
// channel speaks the OpenAI Realtime event protocol; everything the user sees
// (transcript, speaking indicators, latency) is driven by those events.
//
// No framework and no build step on purpose: this file is served as-is.

const $ = (id) => document.getElementById(id);

// Defaults mirror the server's defaults so we only send session.update when
// the user actually changed something.
const DEFAULT_SETTINGS = Object.freeze({ instructions: '', voice: 'joe', threshold: 0.5, silenceMs: 500 });

const ICE_GATHER_TIMEOUT_MS = 5000; // aiortc needs all candidates in the offer
const DEFAULT_RETRY_AFTER_S = 5;    // used when a 503 has no usable Retry-After
const CONNECT_TIMEOUT_MS = 20000;   // browsers take ~30 s to declare ICE failed
const MAX_LOG_ENTRIES = 200;

const STATUS_TEXT = {
  idle: 'Idle — press Connect to start a call',
  connecting: 'Connecting…',
  connected: 'Connected — just start talking',
  busy: 'All lines busy',
  failed: 'Connection failed',
  disconnected: 'Disconnected — the call has ended',
  error: 'Error',
};

// States in which a call (or an attempt at one) is in progress.
const ACTIVE_STATES = new Set(['connecting', 'busy', 'connected']);

const LATENCY_STAGES = [
  ['vad_end_of_turn', 'End-of-turn detection'],
  ['stt', 'Speech-to-text'],
  ['llm_first_token', 'LLM first token'],
  ['first_sentence', 'First sentence'],
  ['tts_first_chunk', 'TTS first chunk'],
  ['first_audio_frame', 'First audio frame'],
  ['voice_to_voice', 'Voice-to-voice'],
];

// Public handle for automated tests and for poking around in devtools.
const vg = { pc: null, dc: null, callId: null, events: [], state: 'idle' };
window.vg = vg;

// Per-call resources that tests don't need to see.
const res = {
  stream: null, audioCtx: null, meterRaf: 0, abort: null,
  retryTimer: 0, connectTimer: 0, attempts: 0,
  inCall: false, // the data channel opened at least once (for the transcript divider)
};

// Every connect/hang-up bumps the generation; async continuations compare it
// to bail out when the user hung up (or re-dialled) while they were awaiting.
let generation = 0;

let settingsDirty = false;        // user edited settings since the last apply
const latencyHistory = [];        // voice_to_voice of past turns, for the average

// Transcript bookkeeping: bubbles are looked up by the ids events carry.
const userBubbles = new Map();      // item_id -> element
const assistantBubbles = new Map(); // response_id -> element
let lastAssistant = null;           // fallback when an event lacks response_id

// ---------------------------------------------------------------------------
// Small helpers

function clamp(n, lo, hi) { return Math.min(hi, Math.max(lo, n)); }

function randomHex(bytes) {
  // crypto.getRandomValues works in insecure contexts too (randomUUID doesn't).
  const a = new Uint8Array(bytes);
  if (window.crypto?.getRandomValues) window.crypto.getRandomValues(a);
  else for (let i = 0; i < bytes; i++) a[i] = Math.floor(Math.random() * 256);
  return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}

function newEventId() { return 'evt_' + randomHex(10); }

function formatMs(ms) { return (typeof ms === 'number' && Number.isFinite(ms)) ? `${Math.round(ms)} ms` : '—'; }

function timeOfDay() { return new Date().toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }); }

// ---------------------------------------------------------------------------
// Status line and buttons

function setState(state, text) {
  vg.state = state;
  const status = $('status');
  status.dataset.state = state;
  document.body.dataset.state = state;
  $('status-text').textContent = text || STATUS_TEXT[state] || state;
  updateControls();
}

function setStatusText(text) { $('status-text').textContent = text; }

function updateControls() {
  const active = ACTIVE_STATES.has(vg.state);
  $('connect').disabled = active;
  $('hangup').disabled = !active;
  $('cancel-retry').hidden = vg.state !== 'busy';
  $('mute').disabled = !res.stream;
  const open = vg.dc?.readyState === 'open';
  $('text-input').disabled = !open;
  $('send-text').disabled = !open;
  $('text-input').placeholder = open ? 'Type a message…' : 'Connect to send a message';
}

// ---------------------------------------------------------------------------
// Error banner (dismissible; also used for local problems like mic access)

function showError(message, title = 'Something went wrong') {
  $('error-title').textContent = title;
  $('error-message').textContent = message || '';
  $('error-banner').hidden = false;
}

function hideError() { $('error-banner').hidden = true; }

// ---------------------------------------------------------------------------
// Microphone

async function getMicrophone() {
  if (!navigator.mediaDevices?.getUserMedia) {
    // mediaDevices is undefined on plain http:// pages other than localhost.
    const err = new Error(window.isSecureContext
      ? 'This browser cannot access the microphone (no getUserMedia support).'
      : 'The microphone is only available on secure pages. Open this demo via https:// or http://localhost.');
    err.name = 'NoMediaDevices';
    throw err;
  }
  return navigator.mediaDevices.getUserMedia({
    audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true },
  });
}

function describeMicError(err) {
  switch (err?.name) {
    case 'NotAllowedError':
    case 'PermissionDeniedError':
    case 'SecurityError':
      return 'Microphone access was blocked. Allow the microphone for this site (see the icon in the address bar), then press Connect again.';
    case 'NotFoundError':
    case 'DevicesNotFoundError':
    case 'OverconstrainedError':
      return 'No microphone was found. Plug one in or enable it in your system settings, then press Connect again.';
    case 'NotReadableError':
    case 'TrackStartError':
    case 'AbortError':
      return 'The microphone could not be started — another application may be using it.';
    case 'NoMediaDevices':
      return err.message;
    default:
      return `Could not open the microphone: ${err?.message || err}`;
  }
}

function stopMicrophone() {
  res.stream?.getTracks().forEach((t) => t.stop());
  res.stream = null;
  const mute = $('mute');
  mute.setAttribute('aria-pressed', 'false');
  mute.textContent = 'Mute';
}

function toggleMute() {
  const track = res.stream?.getAudioTracks()[0];
  if (!track) return;
  track.enabled = !track.enabled;
  const muted = !track.enabled;
  $('mute').setAttribute('aria-pressed', String(muted));
  $('mute').textContent = muted ? 'Unmute' : 'Mute';
  $('level-meter').classList.toggle('muted', muted);
}

// ---------------------------------------------------------------------------
// Input level meter (WebAudio AnalyserNode; works in Chromium and Firefox)

function startLevelMeter(stream) {
  const Ctx = window.AudioContext || window.webkitAudioContext;
  if (!Ctx) return; // meter is a nicety; the call works without it
  const ctx = new Ctx();
  res.audioCtx = ctx;
  ctx.resume?.().catch(() => {});
  const source = ctx.createMediaStreamSource(stream);
  const analyser = ctx.createAnalyser();
  analyser.fftSize = 1024;
  source.connect(analyser);
  // Some engines only pull audio through nodes that reach the destination;
  // route through a silent gain so the mic is never played back.
  const sink = ctx.createGain();
  sink.gain.value = 0;
  analyser.connect(sink).connect(ctx.destination);

  const floats = analyser.getFloatTimeDomainData ? new Float32Array(analyser.fftSize) : null;
  const bytes = floats ? null : new Uint8Array(analyser.fftSize);
  let shown = 0;
  let lastAria = 0;
  const tick = (now) => {
    let sum = 0;
    if (floats) {
      analyser.getFloatTimeDomainData(floats);
      for (const v of floats) sum += v * v;
    } else {
      analyser.getByteTimeDomainData(bytes);
      for (const b of bytes) { const v = (b - 128) / 128; sum += v * v; }
    }
    const rms = Math.sqrt(sum / analyser.fftSize);
    // Map -60..0 dBFS onto 0..1: a perceptual scale that makes speech visible.
    const level = clamp((20 * Math.log10(rms || 1e-8) + 60) / 60, 0, 1);
    shown = Math.max(level, shown * 0.88); // fast attack, slow release
    renderLevel(shown, now - lastAria > 400 && (lastAria = now));
    res.meterRaf = requestAnimationFrame(tick);
  };
  res.meterRaf = requestAnimationFrame(tick);
}

function renderLevel(level, updateAria) {
  const meter = $('level-meter');
  meter.style.setProperty('--level', level.toFixed(3));
  if (updateAria) {
    const pct = String(Math.round(level * 100));
    meter.setAttribute('aria-valuenow', pct);
    meter.dataset.level = pct;
  }
}

function stopLevelMeter() {
  cancelAnimationFrame(res.meterRaf);
  res.meterRaf = 0;
  res.audioCtx?.close().catch(() => {});
  res.audioCtx = null;
  renderLevel(0, true);
  $('level-meter').classList.remove('muted');
}

// ---------------------------------------------------------------------------
// Signalling

class GatewayError extends Error {}

function waitForIceGathering(pc, timeoutMs) {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      pc.removeEventListener('icegatheringstatechange', onState);
      pc.removeEventListener('icecandidate', onCandidate);
      resolve();
    };
    const onState = () => { if (pc.iceGatheringState === 'complete') done(); };
    const onCandidate = (e) => { if (!e.candidate) done(); }; // null = end of candidates
    // If gathering stalls (e.g. an unreachable STUN server) go with what we have.
    const timer = setTimeout(done, timeoutMs);
    pc.addEventListener('icegatheringstatechange', onState);
    pc.addEventListener('icecandidate', onCandidate);
  });
}

// Accepts delta-seconds or an HTTP date, as RFC 9110 allows.
function parseRetryAfter(value) {
  if (!value) return DEFAULT_RETRY_AFTER_S;
  const n = Number(value.trim());
  if (Number.isFinite(n)) return clamp(Math.ceil(n), 1, 300);
  const when = Date.parse(value);
  if (!Number.isNaN(when)) return clamp(Math.ceil((when - Date.now()) / 1000), 1, 300);
  return DEFAULT_RETRY_AFTER_S;
}

async function readErrorMessage(resp) {
  try {
    const body = await resp.json();
    const e = body?.error;
    return { message: e?.message || `HTTP ${resp.status}`, code: e?.code || e?.type };
  } catch {
    return { message: `HTTP ${resp.status} ${resp.statusText}`.trim(), code: undefined };
  }
}

// Returns {answer} or {busy, retryAfter}; throws GatewayError otherwise.
async function postOffer(desc, signal) {
  const resp = await fetch('/offer', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ sdp: desc.sdp, type: desc.type }),
    signal,
  });
  if (resp.ok) return { answer: await resp.json() };
  const { message, code } = await readErrorMessage(resp);
  const retryHeader = resp.headers.get('Retry-After');
  if (resp.status === 503 && (code === 'pool_full' || retryHeader)) {
    return { busy: true, retryAfter: parseRetryAfter(retryHeader) };
  }
  throw new GatewayError(message);
}

function deleteCall(callId) {
  // keepalive lets the request outlive the page when called from pagehide.
  fetch(`/v1/realtime/calls/${encodeURIComponent(callId)}`, { method: 'DELETE', keepalive: true })
    .catch(() => {}); // best effort: closing the peer connection ends the call too
}

// ---------------------------------------------------------------------------
// Call lifecycle

async function connect() {
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
    stream = await getMicrophone();
  } catch (err) {
    if (gen !== generation) return;
    setState('error', 'Microphone unavailable');
    showError(describeMicError(err), 'Microphone unavailable');
    return;
  }
  if (gen !== generation) { stream.getTracks().forEach((t) => t.stop()); return; }
  res.stream = stream;
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
  for (const track of res.stream.getAudioTracks()) pc.addTrack(track, res.stream);
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

function onChannelOpen() {
  clearTimeout(res.connectTimer);
  res.inCall = true;
  setState('connected');
  addDivider(`Call started · ${timeOfDay()}`);
  if (settingsDirty || !sameAsDefaults(readSettings())) applySettings();
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
  finalizeOpenBubbles();
  if (res.inCall) addDivider(`Call ended · ${timeOfDay()}`, 'end');
  res.inCall = false;
  setState(state, text);
}

function hangup() { endCall('idle'); }

// ---------------------------------------------------------------------------
// Data channel: outgoing events

function send(event) {
  const dc = vg.dc;
  if (!dc || dc.readyState !== 'open') return false;
  const payload = { event_id: newEventId(), ...event };
  dc.send(JSON.stringify(payload));
  logEvent(payload.type, 'out');
  return true;
}

function sendText(e) {
  e.preventDefault();
  const input = $('text-input');
  const text = input.value.trim();
  if (!text) return;
  const ok = send({
    type: 'conversation.item.create',
    item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] },
  }) && send({ type: 'response.create' });
  if (!ok) return;
  addBubble('user', text).dataset.source = 'text';
  input.value = '';
}

// ---------------------------------------------------------------------------
// Settings

function readSettings() {
  const threshold = parseFloat($('vad-threshold').value);
  const silenceMs = parseInt($('silence-ms').value, 10);
  return {
    instructions: $('instructions').value.trim(),
    voice: $('voice').value.trim() || DEFAULT_SETTINGS.voice,
    threshold: Number.isFinite(threshold) ? clamp(threshold, 0, 1) : DEFAULT_SETTINGS.threshold,
    silenceMs: Number.isFinite(silenceMs) ? clamp(silenceMs, 0, 10000) : DEFAULT_SETTINGS.silenceMs,
  };
}

function sameAsDefaults(s) {
  return Object.keys(DEFAULT_SETTINGS).every((k) => s[k] === DEFAULT_SETTINGS[k]);
}

function buildSessionUpdate(s) {
  const session = {
    type: 'realtime',
    audio: {
      input: {
        turn_detection: {
          type: 'server_vad',
          threshold: s.threshold,
          silence_duration_ms: s.silenceMs,
          prefix_padding_ms: 300,
          create_response: true,
          interrupt_response: true,
        },
      },
      output: { voice: s.voice },
    },
  };
  // An empty box means "keep the server's prompt", not "no prompt at all".
  if (s.instructions) session.instructions = s.instructions;
  return { type: 'session.update', session };
}

function applySettings(e) {
  e?.preventDefault();
  const s = readSettings();
  // Show the clamped values so the user sees what was actually sent.
  $('vad-threshold').value = String(s.threshold);
  $('silence-ms').value = String(s.silenceMs);
  if (send(buildSessionUpdate(s))) {
    $('settings-note').textContent = 'Applying…';
  } else {
    settingsDirty = true;
    $('settings-note').textContent = 'Saved — applied when the call connects';
  }
}

// Reflect the server's actual session in the form, unless the user has
// pending edits we would overwrite.
function showSession(session) {
  if (!session || settingsDirty) return;
  const td = session.audio?.input?.turn_detection;
  if (typeof session.instructions === 'string') $('instructions').value = session.instructions;
  if (typeof session.audio?.output?.voice === 'string') $('voice').value = session.audio.output.voice;
  if (typeof td?.threshold === 'number') $('vad-threshold').value = String(td.threshold);
  if (typeof td?.silence_duration_ms === 'number') $('silence-ms').value = String(td.silence_duration_ms);
}

// ---------------------------------------------------------------------------
// Data channel: incoming events

const HANDLERS = {
  'session.created': (ev) => showSession(ev.session),
  'session.updated': (ev) => {
    settingsDirty = false;
    showSession(ev.session);
    $('settings-note').textContent = `Applied ✓ ${timeOfDay()}`;
  },
  'error': (ev) => {
    const err = ev.error || {};
    const code = err.code || err.type;
    showError(err.message || 'Unknown error', code ? `Gateway error (${code})` : 'Gateway error');
  },
  'input_audio_buffer.speech_started': (ev) => { setSpeaking('user', true); startUserTurn(ev.item_id); },
  'input_audio_buffer.speech_stopped': (ev) => {
    setSpeaking('user', false);
    const el = findUserBubble(ev.item_id);
    if (el?.dataset.status === 'listening') setBubbleStatus(el, 'transcribing');
  },
  'conversation.item.input_audio_transcription.delta': (ev) => {
    const el = userBubbleFor(ev.item_id);
    appendText(el, ev.delta);
    setBubbleStatus(el, 'partial');
  },
  'conversation.item.input_audio_transcription.completed': (ev) => {
    const el = userBubbleFor(ev.item_id);
    if (typeof ev.transcript === 'string') setText(el, ev.transcript.trim());
    if (!el.textContent) removeBubble(el); // VAD false positive: nothing was said
    else setBubbleStatus(el, 'done');
  },
  'conversation.item.input_audio_transcription.failed': (ev) => {
    const el = findUserBubble(ev.item_id);
    if (el) setBubbleStatus(el, 'failed');
  },
  'response.created': (ev) => { assistantBubbleFor(ev.response?.id); },
  'response.output_audio_transcript.delta': (ev) => onAssistantDelta(ev, ev.delta),
  'response.output_text.delta': (ev) => onAssistantDelta(ev, ev.delta),
  'response.output_audio_transcript.done': (ev) => onAssistantDone(ev, ev.transcript),
  'response.output_text.done': (ev) => onAssistantDone(ev, ev.text),
  'output_audio_buffer.started': () => setSpeaking('assistant', true),
  'output_audio_buffer.stopped': () => setSpeaking('assistant', false),
  'output_audio_buffer.cleared': (ev) => {
    // The caller barged in: the rest of this reply will never be heard.
    setSpeaking('assistant', false);
    const el = findAssistantBubble(ev.response_id);
    if (el) setBubbleStatus(el, 'interrupted');
  },
  'response.done': (ev) => onResponseDone(ev.response || {}),
  'gateway.latency': (ev) => showLatency(ev),
};

function onServerMessage(data) {
  let ev;
  try { ev = JSON.parse(data); } catch { console.warn('non-JSON data channel message', data); return; }
  vg.events.push(ev);
  logEvent(ev.type, 'in');
  const handler = HANDLERS[ev.type];
  if (!handler) return;
  try { handler(ev); } catch (err) { console.error('handler failed for', ev.type, err); }
}

function onAssistantDelta(ev, delta) {
  const el = assistantBubbleFor(ev.response_id);
  appendText(el, delta);
}

function onAssistantDone(ev, full) {
  const el = assistantBubbleFor(ev.response_id);
  if (typeof full === 'string' && full) setText(el, full);
}

function onResponseDone(response) {
  const el = findAssistantBubble(response.id);
  if (!el) return;
  const status = response.status;
  if (status === 'cancelled') setBubbleStatus(el, 'interrupted');
  else if (status === 'failed' || status === 'incomplete') setBubbleStatus(el, status);
  else if (el.dataset.status !== 'interrupted') setBubbleStatus(el, 'done');
  // A completed reply with no words (e.g. a tool-less no-op) is just noise.
  if (!el.textContent && el.dataset.status === 'done') removeBubble(el);
}

// ---------------------------------------------------------------------------
// Transcript rendering. A bubble's textContent is exactly the spoken/typed
// text; labels and status tags are CSS generated content driven by data-*
// attributes, so screen readers and tests read clean text.

const TAGS = {
  user: { listening: 'listening…', transcribing: 'transcribing…', partial: '…', failed: 'transcription failed' },
  assistant: { thinking: 'thinking…', streaming: 'replying…', interrupted: 'interrupted', failed: 'failed', incomplete: 'incomplete' },
};

function transcriptEl() { return $('transcript'); }

// Keep the view pinned to the bottom only if the user hasn't scrolled up.
function withAutoScroll(fn) {
  const t = transcriptEl();
  const pinned = t.scrollHeight - t.scrollTop - t.clientHeight < 60;
  const out = fn();
  if (pinned) t.scrollTop = t.scrollHeight;
  return out;
}

function addBubble(role, text = '') {
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

function addDivider(text, kind = 'start') {
  const t = transcriptEl();
  withAutoScroll(() => {
    $('empty-hint').hidden = true;
    const el = document.createElement('div');
    el.className = 'divider';
    el.dataset.kind = kind;
    el.textContent = text;
    t.append(el);
  });
}

function removeBubble(el) {
  for (const [k, v] of userBubbles) if (v === el) userBubbles.delete(k);
  for (const [k, v] of assistantBubbles) if (v === el) assistantBubbles.delete(k);
  if (lastAssistant === el) lastAssistant = null;
  el.remove();
}

function appendText(el, delta) {
  if (typeof delta !== 'string' || !delta) return;
  withAutoScroll(() => { el.textContent += delta; });
  if (el.classList.contains('assistant') && el.dataset.status === 'thinking') setBubbleStatus(el, 'streaming');
}

function setText(el, text) { withAutoScroll(() => { el.textContent = text; }); }

function setBubbleStatus(el, status) {
  el.dataset.status = status;
  el.classList.toggle('interrupted', status === 'interrupted');
  renderTag(el);
}

// Statuses of a reply still being produced: "replied in …" would contradict "replying…".
const IN_PROGRESS = new Set(['listening', 'transcribing', 'partial', 'thinking', 'streaming']);

function renderTag(el) {
  const role = el.classList.contains('user') ? 'user' : 'assistant';
  const parts = [];
  const tag = TAGS[role][el.dataset.status];
  if (tag) parts.push(tag);
  if (el.dataset.latency && !IN_PROGRESS.has(el.dataset.status)) parts.push(el.dataset.latency);
  if (parts.length) el.dataset.tag = parts.join(' · ');
  else delete el.dataset.tag;
}

// The last bubble is an empty user placeholder: reuse it instead of stacking
// "listening…" bubbles when VAD fires several times without any words.
function emptyUserPlaceholder() {
  const last = transcriptEl().lastElementChild;
  return last?.matches('.msg.user') && !last.textContent ? last : null;
}

function startUserTurn(itemId) {
  if (itemId && userBubbles.has(itemId)) return;
  const el = emptyUserPlaceholder() || addBubble('user');
  setBubbleStatus(el, 'listening');
  if (itemId) { userBubbles.set(itemId, el); el.dataset.itemId = itemId; }
}

function findUserBubble(itemId) {
  if (itemId && userBubbles.has(itemId)) return userBubbles.get(itemId);
  // speech_started may not carry an item_id: fall back to the oldest
  // placeholder that hasn't been claimed by a transcript yet.
  return [...transcriptEl().querySelectorAll('.msg.user:not([data-item-id])')]
    .find((el) => el.dataset.status === 'listening' || el.dataset.status === 'transcribing') || null;
}

function userBubbleFor(itemId) {
  let el = findUserBubble(itemId);
  if (!el) el = addBubble('user');
  if (itemId && !userBubbles.has(itemId)) { userBubbles.set(itemId, el); el.dataset.itemId = itemId; }
  return el;
}

function findAssistantBubble(responseId) {
  if (responseId) return assistantBubbles.get(responseId) || null;
  return lastAssistant;
}

function assistantBubbleFor(responseId) {
  let el = findAssistantBubble(responseId);
  if (!el) {
    el = addBubble('assistant');
    if (responseId) { assistantBubbles.set(responseId, el); el.dataset.responseId = responseId; }
  }
  lastAssistant = el;
  return el;
}

// On hang-up nothing more will arrive: drop empty placeholders and clear
// "in progress" tags so the transcript reads as a finished conversation.
function finalizeOpenBubbles() {
  for (const el of transcriptEl().querySelectorAll('.msg')) {
    const s = el.dataset.status;
    if (!el.textContent && s !== 'interrupted') removeBubble(el);
    else if (IN_PROGRESS.has(s)) setBubbleStatus(el, 'done');
  }
}

function clearTranscript() {
  const t = transcriptEl();
  for (const el of [...t.children]) if (el.id !== 'empty-hint') el.remove();
  userBubbles.clear();
  assistantBubbles.clear();
  lastAssistant = null;
  $('empty-hint').hidden = false;
}

// ---------------------------------------------------------------------------
// Speaking indicators

function setSpeaking(who, active) {
  const el = $(who === 'user' ? 'speaker-user' : 'speaker-assistant');
  el.dataset.active = String(active);
  el.querySelector('.speaker-state').textContent = active ? 'speaking' : 'silent';
}

// ---------------------------------------------------------------------------
// Latency readout

function renderLatencyTable(latency) {
  const values = LATENCY_STAGES.map(([key]) => latency?.[key]).filter((v) => typeof v === 'number');
  const max = Math.max(1, ...values);
  const rows = LATENCY_STAGES.map(([key, label]) => {
    const v = latency?.[key];
    const tr = document.createElement('tr');
    tr.dataset.stage = key;
    if (key === 'voice_to_voice') tr.className = 'total';
    const th = document.createElement('th');
    th.scope = 'row';
    const name = document.createElement('span');
    name.textContent = label;
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.setAttribute('aria-hidden', 'true');
    bar.style.setProperty('--w', typeof v === 'number' ? clamp(v / max, 0, 1).toFixed(3) : '0');
    th.append(name, bar);
    const td = document.createElement('td');
    td.className = 'num';
    td.textContent = formatMs(v);
    tr.append(th, td);
    return tr;
  });
  $('latency-table').tBodies[0].replaceChildren(...rows);
}

function showLatency(ev) {
  const latency = ev.latency_ms || {};
  const v2v = latency.voice_to_voice;
  renderLatencyTable(latency);
  $('latency-v2v').textContent = formatMs(v2v);
  $('latency-v2v').classList.toggle('is-empty', typeof v2v !== 'number');
  if (typeof v2v === 'number') {
    latencyHistory.push(v2v);
    const avg = latencyHistory.reduce((a, b) => a + b, 0) / latencyHistory.length;
    $('latency-avg').textContent = latencyHistory.length > 1
      ? `average ${formatMs(avg)} over ${latencyHistory.length} turns` : '';
  }
  $('latency-turn').textContent = `· turn ${latencyHistory.length || 1}`;
  const el = findAssistantBubble(ev.response_id);
  if (el && typeof v2v === 'number') { el.dataset.latency = `replied in ${formatMs(v2v)}`; renderTag(el); }
}

// ---------------------------------------------------------------------------
// Event log (debug panel). Consecutive events of the same type collapse into
// one row with a counter, so streams of deltas stay readable.

function logEvent(type, dir) {
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

// ---------------------------------------------------------------------------
// Wiring

function init() {
  $('connect').addEventListener('click', connect);
  $('hangup').addEventListener('click', hangup);
  $('cancel-retry').addEventListener('click', hangup);
  $('mute').addEventListener('click', toggleMute);
  $('error-dismiss').addEventListener('click', hideError);
  $('text-form').addEventListener('submit', sendText);
  $('settings-form').addEventListener('submit', applySettings);
  $('settings-form').addEventListener('input', () => {
    settingsDirty = true;
    $('settings-note').textContent = vg.dc?.readyState === 'open' ? 'Unsaved changes' : '';
  });
  $('clear-transcript').addEventListener('click', clearTranscript);
  // Free the line right away when the tab goes away instead of waiting for
  // the server to notice the dead peer.
  window.addEventListener('pagehide', () => {
    if (vg.callId) deleteCall(vg.callId);
    vg.pc?.close();
  });
  renderLatencyTable(null);
  setState('idle');
  vg.send = send; // handy from devtools: vg.send({type: 'response.create'})
}

init();
