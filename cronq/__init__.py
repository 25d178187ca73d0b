"""cronq: a durable, distributed cron service on Redis and an RQ worker fleet."""

__version__ = "0.1.0"
