// Page lookups and formatting shared by the modules of the demo page.

/** The element with this id (the page's fixed elements are in index.html). */
export const $ = (id) => document.getElementById(id);

export function clamp(n, lo, hi) { return Math.min(hi, Math.max(lo, n)); }

/** "123 ms", or "—" for a missing value (ms: a number of milliseconds). */
export function formatMs(ms) { return (typeof ms === 'number' && Number.isFinite(ms)) ? `${Math.round(ms)} ms` : '—'; }

/** The wall-clock time as hh:mm, for dividers and notes. */
export function timeOfDay() { return new Date().toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }); }
