// Outgoing Realtime client events on the "oai-events" data channel, and the ids the page makes.

import { vg } from './handle.js';
import { logEvent } from './log.js';

function randomHex(bytes) {
  // crypto.getRandomValues works in insecure contexts too (randomUUID doesn't).
  const a = new Uint8Array(bytes);
  if (window.crypto?.getRandomValues) window.crypto.getRandomValues(a);
  else for (let i = 0; i < bytes; i++) a[i] = Math.floor(Math.random() * 256);
  return Array.from(a, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** A client event id, "evt_" + 20 hex digits. */
export function newEventId() { return 'evt_' + randomHex(10); }

/** A conversation item id the page chooses ("item_" + 20 hex digits; the Realtime API allows 32 chars). */
export function newItemId() { return 'item_' + randomHex(10); }

/** Send a client event (an object with `type`); false when no channel is open. */
export function send(event) {
  const dc = vg.dc;
  if (!dc || dc.readyState !== 'open') return false;
  const payload = { event_id: newEventId(), ...event };
  dc.send(JSON.stringify(payload));
  logEvent(payload.type, 'out');
  return true;
}

/** The data channel is open: events can be sent. */
export function channelOpen() { return vg.dc?.readyState === 'open'; }
