# One image for the control plane and the workers.
#   docker build -t tessera .                                     # CPU torch
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 -t tessera .
FROM node:22-slim AS dashboard
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

FROM python:3.11-slim
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TESSERA_HOME=/data
# a C compiler for the compiled cores (param_server's table, zo_pair's sign stream)
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --create-home --uid 1000 tessera \
    && mkdir -p /data && chown tessera:tessera /data
WORKDIR /app
# torch first, from the chosen index, so nothing pulls another build
RUN pip install --index-url "${TORCH_INDEX_URL}" torch==2.13.0
COPY pyproject.toml setup.py README.md LICENSE alembic.ini ./
COPY backend/ backend/
COPY worker/ worker/
COPY migrations/ migrations/
COPY docs/ docs/
# editable, so the migrations and the dashboard are found next to the packages
RUN pip install -e . \
    && python -c "from tessera_ml.algorithms.param_server import native; \
from tessera_ml.algorithms.zo_pair import signs; \
assert native.available() and signs.available(), 'the compiled cores did not build'"
COPY --from=dashboard /src/frontend/dist/ frontend/dist/
USER tessera
VOLUME ["/data"]
EXPOSE 8000
CMD ["tessera", "up", "--host", "0.0.0.0", "--port", "8000"]
