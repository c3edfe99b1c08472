# The agentrun worker image: the engine installed once at build time, so a container starts at once.
#   docker build -t agentrun-worker .      (docker compose builds it for you)
FROM python:3.11-slim
WORKDIR /opt/agentrun
COPY pyproject.toml README.md ./
COPY agentrun agentrun
RUN pip install --no-cache-dir . && rm -rf /opt/agentrun/*
CMD ["agentrun", "worker"]
