// Signalling with the gateway over HTTP: a complete (non-trickle) SDP offer to POST /offer, the
// answer or a busy signal (503 pool_full with Retry-After), and the hang-up (DELETE of the call).

import { clamp } from './dom.js';

const DEFAULT_RETRY_AFTER_S = 5; // used when a 503 has no usable Retry-After

/** An error the gateway answered with; its message is fit to show. */
export class GatewayError extends Error {}

/** Resolves once `pc` has gathered all its ICE candidates (aiortc needs them in the offer), or
 * after `timeoutMs` with what it has. */
export function waitForIceGathering(pc, timeoutMs) {
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

// Seconds to wait: Retry-After as delta-seconds or an HTTP date, as RFC 9110 allows; 1..300.
function parseRetryAfter(value) {
  if (!value) return DEFAULT_RETRY_AFTER_S;
  const n = Number(value.trim());
  if (Number.isFinite(n)) return clamp(Math.ceil(n), 1, 300);
  const when = Date.parse(value);
  if (!Number.isNaN(when)) return clamp(Math.ceil((when - Date.now()) / 1000), 1, 300);
  return DEFAULT_RETRY_AFTER_S;
}

// The gateway's JSON error body {"error": {"type", "code", "message"}}, or the HTTP status.
async function readErrorMessage(resp) {
  try {
    const body = await resp.json();
    const e = body?.error;
    return { message: e?.message || `HTTP ${resp.status}`, code: e?.code || e?.type };
  } catch {
    return { message: `HTTP ${resp.status} ${resp.statusText}`.trim(), code: undefined };
  }
}

/** POST the offer `desc` ({sdp, type}); resolves to {answer: {sdp, type, call_id}} or
 * {busy: true, retryAfter: seconds}; rejects with a GatewayError otherwise (or a TypeError when
 * the gateway cannot be reached, an AbortError when `signal` fires). */
export async function postOffer(desc, signal) {
  // gateway_events: this page shows the gateway's own per-turn latency event (a stock Realtime
  // client is sent only OpenAI's events).
  const resp = await fetch('/offer?gateway_events=gateway.latency', {
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

/** Hang up call `callId` (best effort: closing the peer connection ends the call too). */
export function deleteCall(callId) {
  // keepalive lets the request outlive the page when called from pagehide.
  fetch(`/v1/realtime/calls/${encodeURIComponent(callId)}`, { method: 'DELETE', keepalive: true })
    .catch(() => {});
}
