# zero3-lab: the browser lab in a slim image, installed as a plain wheel (no source tree in the image).
# Layers go from what changes least to what changes most: the runtime dependencies are installed before any of
# the app's source is copied, so an edit to app/, templates/ or static/ rebuilds the wheel and nothing else.

# Stage 1: third-party browser assets from the npm registry, pinned by package-lock.json (runtime ones only:
# axe-core is a test dependency).
FROM node:20-slim AS assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts

# Stage 2: the wheel, built by the build backend pinned in pyproject.toml and constraints.txt (installed here from
# the constraints and used with --no-build-isolation, so the isolated build cannot fetch another version). The
# wheel carries templates/ and static/ (htmx and Swagger UI included) inside the package: pyproject.toml's
# force-include.
FROM python:3.11-slim AS wheel
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
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The runtime dependencies, read from pyproject.toml and pinned by constraints.txt, in a layer of their own.
COPY pyproject.toml constraints.txt /tmp/deps/
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('/tmp/deps/pyproject.toml', 'rb'))['project']['dependencies']))" \
      > /tmp/deps/requirements.txt \
    && pip install -c /tmp/deps/constraints.txt -r /tmp/deps/requirements.txt \
    && rm -rf /tmp/deps
# The app, without its dependencies (installed above); pip compiles its bytecode at install.
COPY --from=wheel /wheels /tmp/wheels
RUN pip install --no-deps /tmp/wheels/*.whl && rm -rf /tmp/wheels \
    && groupadd --system --gid 10001 lab \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin lab
# A numeric user, so that an orchestrator's runAsNonRoot can check it.
USER 10001:10001
WORKDIR /tmp
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["zero3-lab", "serve", "--host", "0.0.0.0", "--port", "8000"]
