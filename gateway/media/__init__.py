"""Real-time audio: resampling, the inbound reader and the outbound (paced) track."""
