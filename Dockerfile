# syntax=docker/dockerfile:1

# Build stage: wheels for the project and all its dependencies.
FROM python:3.11-slim AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip wheel --wheel-dir /wheels .

# Runtime stage: only the installed wheels; no compiler, no pip, no caches.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TMPDIR=/tmp \
    DECICE_HOOKS_BIND=0.0.0.0:8080 \
    DECICE_HOOKS_LOG_FORMAT=json

RUN groupadd --system --gid 10001 decice \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin decice

# Bind-mount the wheels instead of COPYing them so they never end up in a layer.
# Byte-code is compiled here, at build time, because the root filesystem is
# read-only at run time: only $TMPDIR (/tmp) must be writable, for gunicorn's
# worker heartbeat files and the Prometheus multiprocess directory. pip,
# setuptools and wheel leave the image once the project is installed.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels decice-bridge \
 && python -m pip uninstall --yes pip setuptools wheel

USER 10001:10001
EXPOSE 8080

# Asks /healthz at the configured bind address, over HTTPS when TLS is on.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["decice-hooks", "--healthcheck"]

ENTRYPOINT ["decice-hooks"]
