"""Placeholder: filled in by its owner."""

from cronq.cli.app import main  # noqa: F401
