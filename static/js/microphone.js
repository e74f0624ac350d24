// The caller's microphone: opening it (with readable errors), muting and releasing it.

import { $ } from './dom.js';

let stream = null; // the MediaStream of the open microphone, or null

/** The open microphone's MediaStream, or null. */
export function microphoneStream() { return stream; }

/** Open the microphone (echo cancellation, noise suppression, gain control); rejects with a
 * DOMException from getUserMedia, or an Error named 'NoMediaDevices' where there is no API. */
export async function openMicrophone() {
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

/** Keep `s` as the call's microphone (stopMicrophone releases it). */
export function useMicrophone(s) { stream = s; }

/** What to tell the user when openMicrophone failed with `err`. */
export function describeMicError(err) {
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

export function stopMicrophone() {
  stream?.getTracks().forEach((t) => t.stop());
  stream = null;
  const mute = $('mute');
  mute.setAttribute('aria-pressed', 'false');
  mute.textContent = 'Mute';
}

export function toggleMute() {
  const track = stream?.getAudioTracks()[0];
  if (!track) return;
  track.enabled = !track.enabled;
  const muted = !track.enabled;
  $('mute').setAttribute('aria-pressed', String(muted));
  $('mute').textContent = muted ? 'Unmute' : 'Mute';
  $('level-meter').classList.toggle('muted', muted);
}
