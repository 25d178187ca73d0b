# cronq's image: the `cronq` command and its dependencies, run as an unprivileged user.
#
#   docker build -t cronq .
#   docker run --rm cronq cronq --help
#
# docker-compose.yml builds it for its worker, watchdog and apply services.
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY cronq ./cronq
RUN pip install . && rm -rf /src

RUN useradd --create-home --uid 10001 --user-group cronq
USER cronq
WORKDIR /home/cronq

CMD ["cronq", "--help"]
