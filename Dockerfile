# One image for every codebot role: the command picks it (`codebot worker`, `codebot slack`,
# `codebot discord`, `codebot web`, `codebot mcp --http`). deploy/compose.yaml runs them all.
#   docker build -t codebot .
#   docker run --rm codebot --help
#
# The base image. Pin it by digest for builds that do not change under you:
#   docker buildx imagetools inspect python:3.11-slim-bookworm     # the "Digest:" line
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:<digest> -t codebot .
# The default below is the tag alone: the machine this file was written on reaches no container
# registry, so no digest could be read from one, and an unverified digest is worse than none.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# The dependency list, from pyproject.toml alone. A stage of its own: the install below is keyed
# on the list's content, so a change elsewhere in pyproject.toml (the version, the linters'
# settings) does not reinstall the dependencies either.
FROM ${PYTHON_IMAGE} AS requirements
COPY pyproject.toml /tmp/pyproject.toml
RUN python -c 'import sys, tomllib; p = tomllib.load(sys.stdin.buffer); print(*p["project"]["dependencies"], *p["build-system"]["requires"], sep="\n")' \
      < /tmp/pyproject.toml > /tmp/requirements.txt

FROM ${PYTHON_IMAGE}

# git: the mirrors are real git repositories (ripgrep ships in its Python wheel).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*

# Non-root: the bot reads untrusted repositories; it never needs to be root to do so.
RUN useradd --system --create-home --home-dir /srv/codebot --uid 10001 codebot
WORKDIR /srv/codebot

# The dependencies (and the build backend) before the code: this layer is rebuilt only when the
# list changes, not on every change to the code.
COPY --from=requirements /tmp/requirements.txt /tmp/requirements.txt
RUN python -m venv /opt/codebot \
 && /opt/codebot/bin/pip install --no-cache-dir --only-binary ripgrep -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# Then the code, installed alone: --no-deps (the layer above has them; `pip check` fails the
# build if one is missing) and --no-build-isolation (the setuptools installed above builds it).
COPY pyproject.toml README.md LICENSE ./
COPY codebot ./codebot
COPY bot ./bot
COPY worker ./worker
COPY config ./config
COPY deploy/healthcheck.py /usr/local/bin/codebot-healthcheck
RUN /opt/codebot/bin/pip install --no-cache-dir --no-deps --no-build-isolation . \
 && /opt/codebot/bin/pip check \
 && chmod 0755 /usr/local/bin/codebot-healthcheck \
 && mkdir -p /srv/codebot/data \
 && chown codebot:codebot /srv/codebot/data

ENV PATH=/opt/codebot/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CODEBOT_DATA_DIR=/srv/codebot/data \
    CODEBOT_LOG_FORMAT=json

USER codebot
VOLUME ["/srv/codebot/data"]
# The role's own /health (deploy/healthcheck.py): the metrics port's when CODEBOT_METRICS_PORT is
# set (workers and adapters: 200 while they can serve, 503 with the reason when Redis is
# unreachable or a worker's tool pool is exhausted). A role started without one is reported
# healthy while it runs (nothing could tell otherwise); compose gives each role its own URL.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 CMD ["codebot-healthcheck"]
# tini forwards SIGTERM to codebot, which shuts its workers down warm (docs/operations.md).
ENTRYPOINT ["tini", "--", "codebot"]
CMD ["worker"]
