"""`cronq run`: everything for one machine in one process tree."""

from __future__ import annotations

import click

from cronq.cli.app import DEFAULT_NAMESPACE, main, service_options
from cronq.runner import Runner, RunOptions


@main.command("run")
@click.option(
    "--config",
    "-c",
    "configs",
    multiple=True,
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="Config file to apply, and to apply again whenever it changes. Repeatable.",
)
@click.option(
    "--workers",
    "-w",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker processes to run (the first also runs the watchdog).",
)
@click.option(
    "--queues",
    "-q",
    multiple=True,
    metavar="QUEUE",
    help="Also serve this RQ queue (those the config's `rq` targets name are served anyway).",
)
@click.option(
    "--redis-url",
    envvar="CRONQ_REDIS_URL",
    default=None,
    help="Use this Redis server instead of starting one. [env: CRONQ_REDIS_URL]",
)
@click.option(
    "--namespace",
    envvar="CRONQ_NAMESPACE",
    default=DEFAULT_NAMESPACE,
    show_default=True,
    help="Prefix of every Redis key cronq owns. [env: CRONQ_NAMESPACE]",
)
@click.option(
    "--data-dir",
    default="./.cronq",
    show_default=True,
    metavar="DIR",
    help="Where the embedded server keeps its data (ignored with --redis-url).",
)
@click.option(
    "--stop-timeout",
    type=click.FloatRange(0, 3600),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="How long stopping workers may take to finish running targets before they are killed.",
)
@service_options
def run(
    configs: tuple[str, ...],
    workers: int,
    queues: tuple[str, ...],
    redis_url: str | None,
    namespace: str,
    data_dir: str,
    stop_timeout: float,
    metrics_port: int | None,
    metrics_host: str,
    log_format: str,
) -> None:
    """Run cronq for one machine: a Redis server, the config, workers, the watchdog.

    With no --redis-url (and no CRONQ_REDIS_URL) it starts a real Redis-compatible server of its
    own (the valkey-server that `pip install` brought, or redis-server/valkey-server on PATH, or
    $CRONQ_REDIS_SERVER) on a free port of 127.0.0.1, with append-only persistence in DIR: stop
    and start `cronq run` in the same directory and every job and its history are still there.
    Its URL is printed at start (`redis: redis://127.0.0.1:PORT/0`) and kept in DIR/url while it
    runs, for the other commands:

    \b
        cronq history hello/tick --redis-url "$(cat .cronq/url)"

    Every --config file is checked first: if any is wrong, every problem is printed as
    `file:line: ...`, nothing starts, and the exit status is 1. The files are applied as by
    `cronq apply`, then looked at every second: a changed file is applied again; a file that
    became invalid is reported and the last good config keeps running.

    It runs N `cronq worker` processes for cronq's queue and the user queues the jobs' `rq`
    targets name, plus --queues. A worker that dies is started again, after a delay that grows
    if it keeps dying. Each invocation of the config's jobs (with no --config: of every job
    there is) is printed as it ends, with how long it ran and how late it started:

    \b
        13:40:02 hello/tick SUCCEEDED 12 ms (lag 20 ms)

    With --metrics-port P, worker i (from 0) serves Prometheus metrics on P+i (P = 0: any free
    port each); --log-format json makes the workers log one JSON object per line.

    \b
    SIGNALS
        SIGINT (Ctrl-C), SIGTERM, SIGHUP: stop. Workers get SIGTERM and finish
        their running targets (for at most --stop-timeout), then the server
        stops (flushing its append-only file); exit status 0. A second signal
        kills the workers at once. On Linux, if `cronq run` itself is killed
        (kill -9), the kernel sends SIGTERM to its workers and server.

    \b
    FILES
        DIR/run.lock   held while `cronq run` runs: a second one on the same
                       DIR is refused (exit status 1) and names the first's pid
        DIR/url        the embedded server's URL, while it runs
        DIR/port       the port it used, taken again next time when free
        DIR/server.pid its pid: a server a crashed run left is stopped first
        DIR/appendonlydir/, DIR/server.log   the server's data and log

    \b
    EXAMPLES
        cronq run --config examples/hello.yaml
        cronq run -c jobs/billing.yaml -c jobs/ops.yaml --workers 4 -q reports
        CRONQ_REDIS_URL=redis://redis:6379/0 cronq run -c jobs/billing.yaml
    """
    options = RunOptions(
        configs=configs,
        workers=workers,
        queues=queues,
        redis_url=redis_url,
        namespace=namespace,
        data_dir=data_dir,
        stop_timeout=stop_timeout,
        worker_args=("--log-format", log_format, "--metrics-host", metrics_host),
        metrics_port=metrics_port,
    )
    runner = Runner(options, say=click.echo, warn=lambda line: click.echo(line, err=True))
    raise SystemExit(runner.run())
