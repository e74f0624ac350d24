# voice-gateway on the offline default models (CPU). Build: docker build -t voice-gateway .
FROM python:3.11-slim
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gateway ./gateway
COPY static ./static
COPY scripts ./scripts
# setup.sh pins torch to the CPU wheel and converts the bundled models into the image's cache.
RUN scripts/setup.sh
ENV VG_HOST=0.0.0.0 VG_PORT=8080
EXPOSE 8080
CMD [".venv/bin/voice-gateway", "serve"]
