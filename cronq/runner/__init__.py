"""`cronq run`: everything for one machine in one process tree (see `supervisor`)."""

from cronq.runner.supervisor import Runner, RunOptions

__all__ = ["RunOptions", "Runner"]
