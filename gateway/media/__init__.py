"""Real-time audio: resampling, the inbound reader and the outbound (paced) track, codecs, and the
caller's media clock and presence (``media_watch``)."""
