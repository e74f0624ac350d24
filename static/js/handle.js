// The page's public handle, `window.vg`, for automated tests and for poking around in devtools:
// the current peer connection and data channel, the call id, every server event received (in
// order) and the call state. The modules write it; nothing outside the page should.

export const vg = { pc: null, dc: null, callId: null, events: [], state: 'idle' };
window.vg = vg;
