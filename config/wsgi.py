"""WSGI entry point for gunicorn and runserver."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()


def _refuse_to_start() -> None:
    """Refuse to serve while runs wait on a workflow version that is not registered, or on
    a database without the functions the code calls (see workflows.checks): once per
    process, when the application is built, never when Django's apps are imported. The
    connection is closed again, so a server that forks after loading the application
    (gunicorn --preload) shares none."""
    from django.db import connections

    from workflows.checks import refuse_to_start

    try:
        refuse_to_start()
    finally:
        connections.close_all()


def _load_urls() -> None:
    """Import the URL configuration, and with it every view and the API's schemas (about
    a second of CPU), when the application is built: gunicorn builds it in each worker
    before the worker takes a connection. Left to the first request, that second fell
    on whichever requests a fresh worker took first, and on every other request the
    machine served meanwhile. Nothing here reads the database."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 # imports ROOT_URLCONF and all it includes


# URLs first: the check then closes every connection, whatever either opened.
_load_urls()
_refuse_to_start()
