# companion-gateway for a server: `companion run` as an unprivileged user, data in the /data
# volume, the config at /config/config.toml (docs/docker.md; compose.yaml) —
# or no file at all: COMPANION_CONFIG= (empty) and COMPANION_<SECTION>__<KEY> variables, as
# compose.yaml's workers run it.
#
# The base image is pinned by digest, so two builds a month apart start from the same bytes:
# python:3.11-slim as published for 3.11.16 (slim-trixie), the multi-architecture index. Bump it
# on purpose, e.g. for security fixes:
#   docker pull python:3.11-slim
#   docker inspect --format '{{index .RepoDigests 0}}' python:3.11-slim
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    COMPANION_CONFIG=/config/config.toml

WORKDIR /build
# Dependencies first, in a layer of their own: the ones pyproject.toml declares, held to the
# versions in requirements.lock (those `make test` passed with). Only a change to either file
# rebuilds this layer; a code change does not reinstall anything.
COPY pyproject.toml requirements.lock ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > requirements.txt \
    && pip install -c requirements.lock -r requirements.txt

COPY README.md ./
COPY bot ./bot
COPY adapters ./adapters
COPY partners ./partners
RUN pip install --no-deps . && rm -rf /build

RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin companion \
    && mkdir -p /data /config \
    && chown companion /data /config
USER companion
WORKDIR /data
VOLUME ["/data"]

# Alive and connected, read from the status file the gateway rewrites every 30 s; never asks
# the LLM provider, so a provider outage does not restart the container.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["companion", "health"]

# `docker run IMAGE` runs the gateway; `docker run -it IMAGE setup` (or doctor, pairing ...)
# runs another command.
ENTRYPOINT ["companion"]
CMD ["run"]
