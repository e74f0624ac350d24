// Input level meter: the microphone's level through a WebAudio AnalyserNode (Chromium and
// Firefox), shown on a -60..0 dBFS scale with a fast attack and a slow release.

import { $, clamp } from './dom.js';

let audioCtx = null;
let frame = 0; // requestAnimationFrame handle

/** Start metering the MediaStream `stream`; a browser without WebAudio gets no meter. */
export function startLevelMeter(stream) {
  const Ctx = window.AudioContext || window.webkitAudioContext;
  if (!Ctx) return; // the meter is a nicety; the call works without it
  const ctx = new Ctx();
  audioCtx = ctx;
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
    frame = requestAnimationFrame(tick);
  };
  frame = requestAnimationFrame(tick);
}

// `level` 0..1 drives the bar (CSS --level); the ARIA value (0..100) is updated less often.
function renderLevel(level, updateAria) {
  const meter = $('level-meter');
  meter.style.setProperty('--level', level.toFixed(3));
  if (updateAria) {
    const pct = String(Math.round(level * 100));
    meter.setAttribute('aria-valuenow', pct);
    meter.dataset.level = pct;
  }
}

export function stopLevelMeter() {
  cancelAnimationFrame(frame);
  frame = 0;
  audioCtx?.close().catch(() => {});
  audioCtx = null;
  renderLevel(0, true);
  $('level-meter').classList.remove('muted');
}
