# companion-gateway for a server: `companion run` as an unprivileged user, data in the /data
# volume, the config mounted at /config/config.toml (README, "Deploying with Docker").
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COMPANION_CONFIG=/config/config.toml

WORKDIR /build
COPY pyproject.toml README.md ./
COPY bot ./bot
COPY adapters ./adapters
COPY partners ./partners
RUN pip install . && rm -rf /build

RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin companion \
    && mkdir -p /data /config \
    && chown companion /data
USER companion
WORKDIR /data
VOLUME ["/data"]

# Alive and connected, read from the status file the gateway rewrites every 30 s; never asks
# the LLM provider, so a provider outage does not restart the container.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["companion", "health"]

ENTRYPOINT ["companion", "run"]
