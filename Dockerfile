# zero3-lab: the browser lab in a slim image. Not built on the development machines (no Docker
# engine there); kept deliberately plain.

# Stage 1: third-party browser assets from the npm registry, pinned by package-lock.json.
FROM node:20-slim AS assets
WORKDIR /assets
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts

# Stage 2: the app.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /srv/zero3-lab
COPY pyproject.toml constraints.txt README.md ./
COPY app ./app
COPY templates ./templates
COPY static ./static
COPY --from=assets /assets/node_modules/htmx.org/dist/htmx.min.js ./static/vendor/htmx.min.js
COPY --from=assets /assets/node_modules/swagger-ui-dist/swagger-ui-bundle.js \
     /assets/node_modules/swagger-ui-dist/swagger-ui.css ./static/vendor/swagger-ui/
RUN pip install -c constraints.txt -e . \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin lab
USER lab
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
CMD ["zero3-lab", "serve", "--host", "0.0.0.0", "--port", "8000"]
