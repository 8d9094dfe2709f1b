# syntax=docker/dockerfile:1

# Build stage: wheels for the project and all its dependencies.
FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip wheel --wheel-dir /wheels .

# Runtime stage: only the installed wheels, no build tools, no pip cache.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DECICE_HOOKS_BIND=0.0.0.0:8080

RUN groupadd --system --gid 10001 decice \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin decice

# Bind-mount the wheels instead of COPYing them so they never end up in a layer.
# Byte-code is compiled here, at build time, because the root filesystem is
# read-only at run time (only /tmp is writable, for gunicorn's heartbeat files).
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels decice-bridge

USER 10001:10001
EXPOSE 8080

HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]

ENTRYPOINT ["decice-hooks"]
