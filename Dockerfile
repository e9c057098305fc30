# syntax=docker/dockerfile:1
# dpstream worker image: `docker build -t dpstream .`
#   docker run --rm -e DPSTREAM_BROKER=kafka:9092 -p 127.0.0.1:9108:9108 dpstream
# Entry point `dpstream` (default command `run`; also `demo`, `tail`, `query`).
# Metrics, /healthz and /readyz on port 9108 (operator-only: exact, private data).
# No embedded broker unless asked: DPSTREAM_BROKER must be set (`dpstream demo` is the
# explicit way to get one).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/dpstream
WORKDIR /src
# dependencies first (pinned; cached while only the code changes)
COPY deploy/docker/requirements.txt ./requirements.txt
RUN /opt/dpstream/bin/pip install --no-compile -r requirements.txt
COPY pyproject.toml README.md ./
COPY sketches ./sketches
COPY worker ./worker
RUN /opt/dpstream/bin/pip install --no-compile --no-deps . \
    && /opt/dpstream/bin/python -m compileall -q /opt/dpstream/lib

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 10001 dpstream \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/dpstream \
       --shell /usr/sbin/nologin dpstream \
    && mkdir -p /var/lib/dpstream && chown 10001:10001 /var/lib/dpstream
COPY --from=build /opt/dpstream /opt/dpstream
COPY topologies /app/topologies
WORKDIR /app
ENV PATH=/opt/dpstream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DPSTREAM_EMBEDDED_BROKER=false \
    DPSTREAM_TOPOLOGIES=/app/topologies/netmon.yaml \
    DPSTREAM_METRICS_HOST=0.0.0.0 \
    DPSTREAM_METRICS_PORT=9108 \
    FAUST_DATADIR=/var/lib/dpstream/{conf.name}-data \
    NUMBA_CACHE_DIR=/tmp/numba-cache
USER 10001:10001
EXPOSE 9108
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9108/healthz', timeout=2)"]
ENTRYPOINT ["dpstream"]
CMD ["run"]
