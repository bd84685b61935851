"""gunicorn's settings for Baton's web process; gunicorn reads this file from its working
directory (the image's /app, or the checkout), and command-line flags still win.

Only the limits live here. gunicorn refuses a request past them itself, with a
plain-text 400, 414 or 431, before Django sees it. The request line's limit is
raised to gunicorn's maximum so that the API's own, lower limit on query strings
(config.api.MAX_QUERY_STRING, 4096 characters) answers first, as problem+json:
only a request line past 8190 bytes still meets gunicorn's plain 414.
"""

import glob
import os
import tempfile

# Method, path, query string and protocol: gunicorn's largest allowed value.
limit_request_line = 8190
# Headers per request, and the size of each (gunicorn's defaults, stated on purpose).
limit_request_fields = 100
limit_request_field_size = 8190


# Metrics (see workflows.exposition): each gunicorn worker counts in its own memory, and
# prometheus-client's multiprocess mode adds them up at /metrics from files in
# PROMETHEUS_MULTIPROC_DIR. The master empties that directory (making it if need be)
# before it starts the workers, which inherit it; with metrics on and no directory
# named, it makes one.


def on_starting(server):
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        os.makedirs(directory, exist_ok=True)
        for stale in glob.glob(os.path.join(directory, "*.db")):
            os.remove(stale)  # counts of an earlier gunicorn, whose processes are gone
    elif os.environ.get("BATON_METRICS_TOKEN"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="baton-metrics-")


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
