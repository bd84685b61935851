"""Durable workflows: definitions, the engine that runs them, and their Celery tasks."""
