"""A user's application package for examples/rq_target.yaml (import it with PYTHONPATH=examples)."""
