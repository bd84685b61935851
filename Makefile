# The two commands a newcomer needs: `make demo` and `make test`.
# Both create the virtual environment and install what they need first.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The tests prove the engine against real PostgreSQL and a real Redis broker;
# set these to point elsewhere (CI sets them explicitly).
TEST_DATABASE_URL ?= $(or $(DATABASE_URL),postgres://postgres@127.0.0.1:5432/postgres)
TEST_BROKER_URL ?= $(or $(CELERY_BROKER_URL),redis://127.0.0.1:6379/15)
# The RabbitMQ e2e tests run the crash tests again in this virtual host (made if missing).
TEST_RABBITMQ_URL ?= $(or $(BATON_TEST_RABBITMQ_URL),amqp://guest:guest@127.0.0.1:5672/baton_tests)

# The benchmarks use the same server as the tests, in databases of their own
# (baton_bench*), and Redis database 14 unless CELERY_BROKER_URL says otherwise.
BENCH_BROKER_URL ?= $(or $(CELERY_BROKER_URL),redis://127.0.0.1:6379/14)

.PHONY: demo test test-loaded bench client chromium pgbouncer oidc-provider lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP)

# The demo's secret key, made on the first `make demo` and kept in var/ with its data
# (`make clean` removes both). Baton has no built-in key: see config/settings.py.
DEMO_SECRET_KEY ?= var/secret_key

$(DEMO_SECRET_KEY):
	mkdir -p $(dir $@)
	umask 077 && $(PYTHON) -c "import secrets; print(secrets.token_urlsafe(50))" > $@.new
	mv $@.new $@

# Web, worker and beat together on SQLite and a file-system broker: nothing to install.
# Production's settings (DEBUG off), with the demo's key (personal data sealed under
# a key derived from it), static files served from
# their folders, so that no collectstatic is needed, plain-text log lines, and HTTPS
# turned off, as the demo serves plain HTTP on 127.0.0.1: no redirect to HTTPS, no
# HSTS, and cookies sent over HTTP (production's defaults are all on).
demo: export DJANGO_SECRET_KEY_FILE = $(abspath $(DEMO_SECRET_KEY))
demo: export BATON_STATIC_FROM_SOURCE = true
demo: export BATON_LOG_FORMAT = text
demo: export BATON_DATA_KEYS_DERIVED = true
demo: export DJANGO_SECURE_SSL_REDIRECT = false
demo: export DJANGO_SECURE_HSTS_SECONDS = 0
demo: export DJANGO_SESSION_COOKIE_SECURE = false
demo: export DJANGO_CSRF_COOKIE_SECURE = false
demo: $(STAMP) $(DEMO_SECRET_KEY)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo
	$(BIN)/honcho -f Procfile.demo start

# Browser tests drive Debian's Chromium (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	}

# The PgBouncer tests start Debian's pgbouncer on a port of their own (tests/pgbouncer.py).
pgbouncer:
	@command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ] || { \
		echo "Installing Debian's pgbouncer for the PgBouncer tests"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q pgbouncer; \
	}

# The single sign-on tests start a real OpenID Connect provider: panva's oidc-provider
# under Debian's Node, at the version tests/oidc/package-lock.json pins.
OIDC_PROVIDER := tests/oidc/node_modules/.package-lock.json

oidc-provider: $(OIDC_PROVIDER)

$(OIDC_PROVIDER): tests/oidc/package.json tests/oidc/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
		echo "Installing Debian's nodejs and npm for the single sign-on tests"; \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm; \
	}
	npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error
	touch $@

# tests/run runs the unit tests beside the e2e tests, then the tests that restart
# Redis and PostgreSQL alone; with PYTEST_ARGS, it is plain pytest with those. The unit
# tests run in a random order (pytest-randomly prints its seed; rerun one with
# PYTEST_ARGS=--randomly-seed=N); tests/e2e keeps the order it needs.
test: $(STAMP) chromium pgbouncer oidc-provider
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		BATON_TEST_RABBITMQ_URL=$(TEST_RABBITMQ_URL) PYTEST=$(BIN)/pytest tests/run $(PYTEST_ARGS)

# `make test` with both cores busy with another load, as on a slower CI machine;
# the e2e tests' timeouts stretch by BATON_TEST_SLOWDOWN (3 unless set).
test-loaded:
	.ci/loaded $(MAKE) test

# Baton's typed Python client, generated from the API's OpenAPI document into
# build/baton-client (a package to `pip install` or publish), with openapi-python-client.
client: $(STAMP)
	mkdir -p build
	DJANGO_SECRET_KEY=client-generation BATON_DATA_KEYS_DERIVED=true \
		$(BIN)/python manage.py export_openapi_schema \
		--api config.api.api --output build/openapi.json
	$(BIN)/openapi-python-client generate --path build/openapi.json \
		--config clients/python/openapi-python-client.yml --output-path build/baton-client --overwrite

# The full benchmark suite takes minutes (it seeds a million rows once, then
# reuses them); QUICK=1 runs smaller sizes in about a minute. GROUPS="sweep inbox" runs
# only those; the scale group (years of history) runs only when named:
# `make bench GROUPS=scale SCALE_RUNS=200000`.
bench: $(STAMP)
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(BENCH_BROKER_URL) \
		$(BIN)/python -m bench $(if $(QUICK),--quick) $(foreach group,$(GROUPS),--only $(group)) \
		$(if $(SCALE_RUNS),--scale-runs $(SCALE_RUNS)) $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/bandit -r config workflows approvals -ll -q

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) var staticfiles build tests/oidc/node_modules
