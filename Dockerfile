# The agentrun worker image: the engine installed once at build time, so a container starts at once.
#   docker build -t agentrun-worker .      (docker compose builds it for you)
FROM python:3.11-slim
WORKDIR /opt/agentrun
COPY pyproject.toml README.md ./
COPY agentrun agentrun
# With the S3 client, for AGENTRUN_BLOB_URL=s3://… (workers on other machines share values that way).
RUN pip install --no-cache-dir ".[s3]" && rm -rf /opt/agentrun/*
CMD ["agentrun", "worker"]
