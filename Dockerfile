# zero3-lab: the browser lab as a container, installed as a plain wheel (no source tree in the image).
#
#   podman build --format docker -t zero3-lab .                          # lean: the page, no traces
#   podman build --format docker --build-arg EXTRAS=trace -t zero3-lab:trace .   # + a CPU torch: traces work
#
# scripts/image builds both and smoke-tests them; docs/deploy.md runs them (one box, compose.yaml with Redis and
# trace workers). Layers go from what changes least to what changes most: the dependencies are installed before any
# of the app's source is copied, so a one-line edit to app/, templates/ or static/ rebuilds the wheel and nothing else.
#
# Bases: supported releases — Python 3.11 (security fixes until 2027-10) on Debian 12, Node 24 LTS (until 2028-04).
# Pin them by digest for a reproducible build: pass --build-arg PYTHON_IMAGE=…@sha256:… and NODE_IMAGE=…@sha256:…,
# the digests `podman pull <image> && podman image inspect --format '{{.Digest}}' <image>` prints (scripts/image
# prints the ones it built from). Refresh them with the same two commands when the base images are rebuilt.
ARG PYTHON_IMAGE=docker.io/library/python:3.11-slim-bookworm
ARG NODE_IMAGE=docker.io/library/node:24-bookworm-slim

# Stage 1: the browser assets (htmx, Swagger UI) from the npm registry, pinned by package-lock.json with its integrity
# hashes; --omit=dev leaves out axe-core, which only the accessibility tests read.
FROM ${NODE_IMAGE} AS assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts

# Stage 2: the wheel, built by the backend pyproject.toml pins (hatchling), installed here from constraints.txt and
# used with --no-build-isolation, so that pip's isolated build cannot fetch another version. The wheel carries
# templates/ and static/ (the vendored assets included) inside the package: pyproject.toml's force-include.
FROM ${PYTHON_IMAGE} AS wheel
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY constraints.txt ./
RUN pip install -c constraints.txt hatchling
COPY pyproject.toml README.md ./
COPY app ./app
COPY templates ./templates
COPY static ./static
COPY --from=assets /assets/node_modules/htmx.org/dist/htmx.min.js ./static/vendor/htmx.min.js
COPY --from=assets /assets/node_modules/swagger-ui-dist/swagger-ui-bundle.js \
     /assets/node_modules/swagger-ui-dist/swagger-ui.css ./static/vendor/swagger-ui/
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels .

# Stage 3: the runtime.
FROM ${PYTHON_IMAGE}
# The settings serve reads (docs/deploy.md); the health check follows ZERO3_LAB_PORT. The data folder holds the
# trace cache and the embedded queue; HOME points there so that nothing writes under a read-only root.
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ZERO3_LAB_HOST=0.0.0.0 ZERO3_LAB_PORT=8000 ZERO3_LAB_WORKERS=1 \
    ZERO3_LAB_TRACE_CACHE=/var/lib/zero3-lab/traces.sqlite3 HOME=/var/lib/zero3-lab
# The runtime dependencies, every file checked against its hash (requirements.txt, from scripts/lock).
COPY requirements.txt /tmp/deps/
RUN pip install --require-hashes -r /tmp/deps/requirements.txt && rm -rf /tmp/deps
# The trace extra, in a layer of its own (the largest: torch), read from pyproject.toml and pinned by constraints.txt.
# Its build arguments are declared here, not above, so that they never invalidate the layers before this one.
# EXTRAS=trace adds pyproject.toml's trace extra (torch pinned, from TORCH_INDEX: PyTorch's CPU wheels) and torchtitan,
# so that the page's trace button works; empty (the default) keeps the image lean. Unlike the runtime dependencies
# these carry no hashes yet (torch's CPU wheels come from another index): pinned by version only.
ARG EXTRAS=""
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
# …or a folder of wheels mounted into the build (podman build -v /opt/wheels:/opt/wheels:ro), e.g. a CPU torch on disk
ARG TORCH_WHEELS=""
COPY pyproject.toml constraints.txt /tmp/deps/
RUN case "$EXTRAS" in \
      "") ;; \
      trace) python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/deps/pyproject.toml', 'rb'))['project']['optional-dependencies']['trace']))" \
               > /tmp/deps/trace.txt \
             && pip install ${TORCH_INDEX:+--extra-index-url "$TORCH_INDEX"} ${TORCH_WHEELS:+--find-links "$TORCH_WHEELS"} -c /tmp/deps/constraints.txt -r /tmp/deps/trace.txt \
             && pip install --no-deps -c /tmp/deps/constraints.txt torchtitan ;; \
      *) echo "EXTRAS=$EXTRAS: only trace, or empty" >&2; exit 2 ;; \
    esac \
    && rm -rf /tmp/deps
# The app, without its dependencies (installed above); pip compiles its bytecode at install, so a read-only root
# never needs to write a .pyc.
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-deps /tmp/wheels/*.whl && rm -rf /tmp/wheels \
    && groupadd --system --gid 10001 lab \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/zero3-lab \
       --shell /usr/sbin/nologin lab \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/zero3-lab
VOLUME /var/lib/zero3-lab
# A numeric user, so that an orchestrator's runAsNonRoot can check it.
USER 10001:10001
WORKDIR /var/lib/zero3-lab
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('ZERO3_LAB_PORT', '8000'); sys.exit(urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2).status != 200)"]
CMD ["zero3-lab", "serve"]
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="zero3-lab" \
      org.opencontainers.image.description="Budget every byte of a ZeRO-3 / FSDP training run: an exact per-rank memory ledger." \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.version="${VERSION}"
