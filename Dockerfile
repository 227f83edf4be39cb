# The transqueue runtime image: Celery workers, the scheduler, Flower, the metrics exporter and
# the CLI.
# The package is installed without its [export] extra, so the image holds no torch,
# transformers or sentencepiece: models are exported elsewhere (`transqueue export`) and
# mounted as a bundle directory (TRANSQUEUE_BUNDLE); without one, the bundled demo model runs.
# BASE: any image with python3 (>= 3.11) and its venv module; deploy/base-image.sh builds one
# from Debian without a registry (deploy/compose-check.sh passes it).
ARG BASE=python:3.11-slim
FROM ${BASE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

RUN useradd --create-home --uid 1000 transqueue
WORKDIR /app
COPY pyproject.toml README.md ./
COPY cli cli
COPY producer producer
COPY store store
COPY worker worker
COPY models models
RUN python3 -m venv /opt/transqueue \
 && /opt/transqueue/bin/pip install ".[monitor]" \
 && /opt/transqueue/bin/python -c "import importlib.util as u, sys; heavy = [m for m in ('torch', 'transformers', 'sentencepiece') if u.find_spec(m)]; sys.exit(f'export-time packages in the image: {heavy}' if heavy else 0)"

ENV PATH=/opt/transqueue/bin:$PATH
USER transqueue
# One worker container owns 2 CPUs: one solo-pool process whose Translator decodes two
# batches side by side, one ONNX Runtime thread each (bench/pool_results.md).
ENV TRANSQUEUE_POOL=solo \
    TRANSQUEUE_CONCURRENCY=1 \
    TRANSQUEUE_THREADS=2
CMD ["transqueue", "worker"]
