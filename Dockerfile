# One image for every codebot role: the command picks it (`codebot worker`, `codebot slack`,
# `codebot discord`, `codebot web`, `codebot mcp --http`). deploy/compose.yaml runs them all.
#   docker build -t codebot .
#   docker run --rm codebot --help
FROM python:3.11-slim-bookworm

# git: the mirrors are real git repositories (ripgrep ships in its Python wheel).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/*

# Non-root: the bot reads untrusted repositories; it never needs to be root to do so.
RUN useradd --system --create-home --home-dir /srv/codebot --uid 10001 codebot
WORKDIR /srv/codebot

COPY pyproject.toml README.md LICENSE ./
COPY codebot ./codebot
COPY bot ./bot
COPY worker ./worker
COPY config ./config
RUN python -m venv /opt/codebot \
 && /opt/codebot/bin/pip install --no-cache-dir --only-binary ripgrep . \
 && mkdir -p /srv/codebot/data \
 && chown codebot:codebot /srv/codebot/data

ENV PATH=/opt/codebot/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    CODEBOT_DATA_DIR=/srv/codebot/data \
    CODEBOT_LOG_FORMAT=json

USER codebot
VOLUME ["/srv/codebot/data"]
# tini forwards SIGTERM to codebot, which shuts its workers down warm (docs/operations.md).
ENTRYPOINT ["tini", "--", "codebot"]
CMD ["worker"]
