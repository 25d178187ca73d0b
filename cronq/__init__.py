"""cronq: a durable, distributed cron service on Redis and an RQ worker fleet.

The Python API: `Client` (add, get, delete, list, trigger, pause, resume, abort, history,
apply) and the `@job` decorator; the command line is `cronq` (`cronq.cli`).
"""

__version__ = "0.1.0"  # before the imports: cronq.cli reads it while they load

from cronq.apply import Change, ProjectPlan
from cronq.client import Client, Invocation, JobInfo
from cronq.config import JobSpec
from cronq.decorators import job
from cronq.errors import ConfigError, JobExists, JobRefused, UnknownJob

__all__ = [
    "Change",
    "Client",
    "ConfigError",
    "Invocation",
    "JobExists",
    "JobInfo",
    "JobRefused",
    "JobSpec",
    "ProjectPlan",
    "UnknownJob",
    "__version__",
    "job",
]
