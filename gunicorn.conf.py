"""gunicorn's settings for Baton's web process; gunicorn reads this file from its working
directory (the image's /app, or the checkout), and command-line flags still win.

Only the limits live here. gunicorn refuses a request past them itself, with a
plain-text 400, 414 or 431, before Django sees it. The request line's limit is
raised to gunicorn's maximum so that the API's own, lower limit on query strings
(config.api.MAX_QUERY_STRING, 4096 characters) answers first, as problem+json:
only a request line past 8190 bytes still meets gunicorn's plain 414.
"""

# Method, path, query string and protocol: gunicorn's largest allowed value.
limit_request_line = 8190
# Headers per request, and the size of each (gunicorn's defaults, stated on purpose).
limit_request_fields = 100
limit_request_field_size = 8190
