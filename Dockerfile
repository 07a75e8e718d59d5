# attention-scaling: the explorer as a hardened, read-only-friendly container.
#
#   docker build -t attention-scaling .
#   docker run -d --name attention-scaling --restart unless-stopped \
#     --read-only --tmpfs /tmp --cap-drop ALL --security-opt no-new-privileges \
#     --memory 2g --pids-limit 256 --ulimit nofile=8192:8192 --log-opt max-size=10m --log-opt max-file=3 \
#     -p 5006:5006 -e ATTENTION_SCALING_ALLOWED_ORIGINS=TEACHER-IP:5006 attention-scaling
#
# --memory: 100 MiB + 2 MiB per open session, ~700 MiB for 300 students (docs/deploy.md,
# sizing); --pids-limit: the server runs 2 tasks (3 with two workers), so 256 leaves room for
# a worker per core and stops a runaway; --ulimit nofile: a websocket per student, kept-alive
# connections and half-sent requests until the 10 s header timeout; --log-opt: the log
# rotates at 10 MB, 3 files kept.
#
# Configured by environment variables (see docs/deploy.md, "Settings"):
# ATTENTION_SCALING_PORT, ATTENTION_SCALING_ALLOWED_ORIGINS, ATTENTION_SCALING_WORKERS,
# ATTENTION_SCALING_PREFIX.
#
# Build arguments, for offline builds (`make test-docker` uses both); by default the build
# pulls BASE_IMAGE and downloads the pinned wheels from PyPI (each checked against its hash in
# docker/*requirements.txt; scripts/docker-requirements-hashes.py writes those):
#   BASE_IMAGE  an image with the same Python layout (CPython in /usr/local), e.g. a local
#               stand-in made by scripts/docker-base-standin
#   WHEELHOUSE  a directory inside the build context holding every wheel of
#               docker/requirements.txt and docker/build-requirements.txt; pip then installs
#               from it with --no-index and never touches the network
ARG BASE_IMAGE=python:3.11.7-slim-bookworm

# ---- builder: every wheel the image needs, in /wheels/deps and /wheels/app -----------------
FROM ${BASE_IMAGE} AS builder
ARG WHEELHOUSE=
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY docker/requirements.txt docker/build-requirements.txt docker/
# With no WHEELHOUSE this copies a harmless text file, so the instruction works either way.
COPY ${WHEELHOUSE:-docker/requirements.txt} /wheelhouse/
# Dependencies: binary wheels only, exactly the pinned versions, each file checked against
# the sha256 the requirements list for it; and the build backend, checked the same way.
RUN pip wheel --require-hashes --only-binary=:all: --wheel-dir /wheels/deps \
        ${WHEELHOUSE:+--no-index --find-links /wheelhouse} -r docker/requirements.txt \
 && sha256sum /wheels/deps/*.whl > /wheels/deps.sha256 \
 && pip install --require-hashes --only-binary=:all: \
        ${WHEELHOUSE:+--no-index --find-links /wheelhouse} -r docker/build-requirements.txt
# The project itself, built from this source tree.
COPY pyproject.toml README.md ./
COPY assets/ assets/
COPY src/ src/
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /wheels/app . \
 && sha256sum /wheels/app/*.whl > /wheels/app.sha256

# ---- final: the base image, the wheels installed, nothing else -----------------------------
FROM ${BASE_IMAGE}
LABEL org.opencontainers.image.title="attention-scaling" \
      org.opencontainers.image.description="Why scaled dot-product attention divides its logits by sqrt(d_k): an interactive explorer" \
      org.opencontainers.image.licenses="MIT"
# HOME on the tmpfs: the root filesystem is read-only, and nothing should try to write there.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    ATTENTION_SCALING_ADDRESS=0.0.0.0 \
    ATTENTION_SCALING_PORT=5006 \
    ATTENTION_SCALING_ALLOWED_ORIGINS= \
    ATTENTION_SCALING_WORKERS=1 \
    ATTENTION_SCALING_PREFIX=

# Exactly the built wheels, byte-compiled by pip: the dependencies first, then the project (a
# source change redoes only that layer). The dependencies come only from the builder's wheels
# (--no-index) and are checked again against the requirements' hashes, which must also name
# every dependency of every one of them (--require-hashes resolves nothing unpinned).
# Each list of hashes is kept as a record of what is installed; copying it first also makes a
# changed wheel invalidate the build cache of the RUN after it (podman's buildah does not look
# inside a bind mount to decide that).
COPY --from=builder /wheels/deps.sha256 /usr/local/share/attention-scaling/dependencies.sha256
RUN --mount=type=bind,from=builder,source=/wheels/deps,target=/wheels \
    --mount=type=bind,from=builder,source=/src/docker/requirements.txt,target=/requirements.txt \
    pip install --require-hashes --no-index --find-links /wheels --no-cache-dir \
        --disable-pip-version-check --root-user-action=ignore -r /requirements.txt \
 && groupadd --system --gid 10001 app \
 && useradd --no-log-init --uid 10001 --gid 10001 --home-dir /nonexistent \
        --no-create-home --shell /usr/sbin/nologin app
# Then the project: its wheel is built in the builder stage from this tree, so it has no hash to
# pin in advance (--no-deps: its dependencies are the ones above). pip checks the whole set,
# then the packaging tools go: nothing is installed in the image again (no compiler was ever
# in it).
COPY --from=builder /wheels/app.sha256 /usr/local/share/attention-scaling/app.sha256
RUN --mount=type=bind,from=builder,source=/wheels/app,target=/wheels \
    pip install --no-index --no-deps --no-cache-dir --disable-pip-version-check \
        --root-user-action=ignore /wheels/*.whl \
 && pip check \
 && pip uninstall --yes --root-user-action=ignore pip setuptools wheel

USER 10001:10001
WORKDIR /tmp
EXPOSE 5006

# The server stops cleanly on SIGINT and SIGTERM (attention-scaling serve handles both).
STOPSIGNAL SIGINT

# No curl in a slim image: Python asks Panel's /liveness (under the prefix, on the port set).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; port = os.environ.get('ATTENTION_SCALING_PORT') or '5006'; prefix = os.environ.get('ATTENTION_SCALING_PREFIX', '').strip().strip('/'); urllib.request.urlopen('http://127.0.0.1:%s%s/liveness' % (port, '/' + prefix if prefix else ''), timeout=4)"]

ENTRYPOINT ["attention-scaling"]
CMD ["serve"]
