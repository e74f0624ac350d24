"""A caller on GStreamer's WebRTC stack (``webrtcbin``: libnice ICE, its own DTLS with an RSA
certificate, SRTP), run by the system python3 with python3-gst-1.0 (not the project's venv).

It offers what a SIP-to-WebRTC bridge offers: PCMU only, ``telephone-event/8000`` (payload type
101), no data channel. It plays a WAV file to the gateway in real time (``identity sync=true``),
records what it hears, and sends RFC 4733 digits (``rtpdtmfsrc`` into ``rtpdtmfmux``, on the voice
SSRC) when told.

Usage: ``/usr/bin/python3 gst_caller.py <gateway URL> <question.wav> <reply.wav>``

stdout, one line each: ``ANSWERED <call id>``, ``CONNECTED``, ``DTMF_SENT <digits>``,
``STOPPED <seconds of audio recorded>``, or ``FAILED <reason>`` (then exit status 1).
stdin, one command a line: ``DTMF <digits>`` (0-9 * #), ``STOP`` (write the reply WAV and exit).
"""

from __future__ import annotations

import sys
import threading
import time
import urllib.request
import wave

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstSdp", "1.0")
gi.require_version("GstWebRTC", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

RATE = 8000
DTMF_PT = 101
VOICE_CAPS = f"application/x-rtp,media=audio,encoding-name=PCMU,payload=0,clock-rate={RATE}"
PIPELINE = (
    "webrtcbin name=webrtc bundle-policy=max-bundle "
    "filesrc location={wav} ! wavparse ! audioconvert ! audioresample "
    f"! audio/x-raw,rate={RATE},channels=1 ! identity sync=true ! mulawenc ! rtppcmupay pt=0 min-ptime=20000000 "
    "max-ptime=20000000 ! mux.sink_0 "
    f"rtpdtmfsrc name=dtmf pt={DTMF_PT} clock-rate={RATE} ! mux.priority_sink_0 "
    # rtpdtmfmux announces the caps of whichever input it forwards; webrtcbin's sink takes only the
    # voice caps it offered, so they are held (the packets themselves carry their payload type).
    f'rtpdtmfmux name=mux ! capssetter join=false replace=true caps="{VOICE_CAPS}" ! webrtc.sink_0'
)
DIGITS = "0123456789*#"


def say(line: str) -> None:
    print(line, flush=True)


def with_telephone_event(sdp: str) -> str:
    """``sdp`` with ``telephone-event/8000`` (payload type 101) added to its audio m-line."""
    out = []
    for line in sdp.splitlines():
        if line.startswith("m=audio "):
            line += f" {DTMF_PT}"
        out.append(line)
        if line.startswith("a=rtpmap:0 "):
            out += [f"a=rtpmap:{DTMF_PT} telephone-event/{RATE}", f"a=fmtp:{DTMF_PT} 0-15"]
    return "\r\n".join(out) + "\r\n"


class Caller:
    def __init__(self, url: str, question: str, reply: str) -> None:
        self.url = url.rstrip("/")
        self.reply_path = reply
        self.pipeline = Gst.parse_launch(PIPELINE.format(wav=question))
        self.webrtc = self.pipeline.get_by_name("webrtc")
        self.dtmf = self.pipeline.get_by_name("dtmf")
        # What the m-line offers (the mux's caps change to telephone-event while a digit is sent).
        transceiver = self.webrtc.emit("get-transceiver", 0)
        transceiver.set_property("codec-preferences", Gst.Caps.from_string(VOICE_CAPS))
        self.recorded = bytearray()
        self.loop = GLib.MainLoop()
        self.offered = False
        self.posted = False
        self.failed = False
        self.webrtc.connect("on-negotiation-needed", self.on_negotiation_needed)
        self.webrtc.connect("notify::ice-gathering-state", self.on_gathering)
        self.webrtc.connect("notify::connection-state", self.on_connection_state)
        self.webrtc.connect("pad-added", self.on_pad_added)
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self.on_error)

    # ----- signaling: offer, ICE gathering, POST, answer -----
    def on_negotiation_needed(self, webrtc: Gst.Element) -> None:
        promise = Gst.Promise.new_with_change_func(self.on_offer, None)
        webrtc.emit("create-offer", None, promise)

    def on_offer(self, promise: Gst.Promise, _data: object) -> None:
        reply = promise.get_reply()
        offer = reply.get_value("offer") if reply is not None else None
        if offer is None or self.offered:
            return  # a second negotiation-needed while the first offer is out
        self.offered = True
        # webrtcbin offers only what its sink pad carries (PCMU); rtpdtmfmux sends telephone-event
        # on the same stream, so it is offered here too, as a bridge's SDP lists it.
        text = with_telephone_event(offer.sdp.as_text())
        _, message = GstSdp.SDPMessage.new_from_text(text)
        offer = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.OFFER, message)
        self.webrtc.emit("set-local-description", offer, Gst.Promise.new())

    def on_gathering(self, webrtc: Gst.Element, _spec: object) -> None:
        if webrtc.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE and not self.posted:
            self.posted = True
            GLib.idle_add(self.post_offer)

    def post_offer(self) -> bool:
        offer = self.webrtc.get_property("local-description").sdp.as_text()
        request = urllib.request.Request(
            f"{self.url}/v1/realtime/calls",
            data=offer.encode(),
            headers={"Content-Type": "application/sdp"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                answer = response.read().decode()
                call_id = response.headers["Location"].rsplit("/", 1)[-1]
        except Exception as exc:  # reported to the test
            body = exc.read().decode(errors="replace")[:300] if hasattr(exc, "read") else ""
            self.fail(f"offer refused: {exc} {body}")
            return False
        say(f"ANSWERED {call_id}")
        _, message = GstSdp.SDPMessage.new_from_text(answer)
        description = GstWebRTC.WebRTCSessionDescription.new(GstWebRTC.WebRTCSDPType.ANSWER, message)
        self.webrtc.emit("set-remote-description", description, Gst.Promise.new())
        return False

    def on_connection_state(self, webrtc: Gst.Element, _spec: object) -> None:
        state = webrtc.get_property("connection-state")
        if state == GstWebRTC.WebRTCPeerConnectionState.CONNECTED:
            say("CONNECTED")
        elif state == GstWebRTC.WebRTCPeerConnectionState.FAILED:
            self.fail("connection failed")

    # ----- what the gateway says, recorded -----
    def on_pad_added(self, webrtc: Gst.Element, pad: Gst.Pad) -> None:
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        branch = Gst.parse_bin_from_description(
            "queue ! rtppcmudepay ! mulawdec ! audioconvert ! audioresample "
            f"! audio/x-raw,format=S16LE,rate={RATE},channels=1 ! appsink name=out emit-signals=true sync=false",
            True,
        )
        self.pipeline.add(branch)
        branch.sync_state_with_parent()
        branch.get_by_name("out").connect("new-sample", self.on_sample)
        pad.link(branch.get_static_pad("sink"))

    def on_sample(self, sink: Gst.Element) -> Gst.FlowReturn:
        buffer = sink.emit("pull-sample").get_buffer()
        ok, info = buffer.map(Gst.MapFlags.READ)
        if ok:
            self.recorded.extend(info.data)
            buffer.unmap(info)
        return Gst.FlowReturn.OK

    # ----- RFC 4733 digits -----
    def send_digits(self, digits: str) -> bool:
        for digit in digits:
            self.dtmf_event(DIGITS.index(digit), start=True)
            time.sleep(0.16)
            self.dtmf_event(DIGITS.index(digit), start=False)
            time.sleep(0.12)
        say(f"DTMF_SENT {digits}")
        return False

    def dtmf_event(self, number: int, start: bool) -> None:
        fields = f"dtmf-event, type=(int)1, number=(int){number}, volume=(int)25, start=(boolean){str(start).lower()}"
        event = Gst.Event.new_custom(Gst.EventType.CUSTOM_UPSTREAM, Gst.Structure.new_from_string(fields))
        self.dtmf.get_static_pad("src").send_event(event)  # into the source, as an upstream event

    # ----- control -----
    def on_error(self, _bus: Gst.Bus, message: Gst.Message) -> None:
        error, _debug = message.parse_error()
        self.fail(f"pipeline error: {error.message}")

    def fail(self, reason: str) -> None:
        say(f"FAILED {reason}")
        self.failed = True
        GLib.idle_add(self.loop.quit)

    def stop(self) -> bool:
        self.pipeline.set_state(Gst.State.NULL)
        with wave.open(self.reply_path, "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(RATE)
            out.writeframes(bytes(self.recorded))
        say(f"STOPPED {len(self.recorded) / 2 / RATE:.2f}")
        self.loop.quit()
        return False

    def read_commands(self) -> None:
        for line in sys.stdin:
            command, _, argument = line.strip().partition(" ")
            if command == "DTMF":
                threading.Thread(target=self.send_digits, args=(argument,), daemon=True).start()
            elif command == "STOP":
                GLib.idle_add(self.stop)
                return
        GLib.idle_add(self.stop)

    def run(self) -> None:
        threading.Thread(target=self.read_commands, daemon=True).start()
        self.pipeline.set_state(Gst.State.PLAYING)
        self.loop.run()
        self.pipeline.set_state(Gst.State.NULL)


if __name__ == "__main__":
    Gst.init(None)
    caller = Caller(sys.argv[1], sys.argv[2], sys.argv[3])
    caller.run()
    sys.exit(1 if caller.failed else 0)
