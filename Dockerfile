# voice-gateway on the offline default models (CPU). Build: docker build -t voice-gateway .
# Run several behind nginx with coturn: docker-compose.yml and docs/DEPLOYMENT.md.
FROM python:3.11-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY static ./static
COPY scripts ./scripts
# setup.sh pins torch to the CPU wheel and converts the bundled models into the image's cache
# (/root/.cache/voice-gateway: the llm-server profile of docker-compose.yml serves the joined GGUF).
RUN scripts/setup.sh
ENV VG_HOST=0.0.0.0 VG_PORT=8080
# No API key is built in, and `serve` refuses to listen on 0.0.0.0 without one: run the image with
# -e VG_API_KEY=<key> (or -e VG_ALLOW_NO_API_KEY=1 when something in front checks every caller).
EXPOSE 8080
# SIGTERM drains: no new calls (503, /healthz "draining"), live calls finish their answer within
# VG_SHUTDOWN_GRACE_S (default 30), then exit 0. Give `docker stop -t` / stop_grace_period more than that.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s \
  CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz')"]
# Exec form: the gateway is PID 1 and receives the signal itself.
CMD [".venv/bin/voice-gateway", "serve"]
