# The two set-up commands (README): `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The second test pass runs on these (the machine's own services; .ci/run starts them if down).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_BROKER_URL ?= redis://127.0.0.1:6379/15

.PHONY: demo test lint install

# What the dashboard needs to run (make demo), then the test tools on top (make test):
# the demo does not install pytest, Playwright, moto and the linters.
$(VENV)/.installed-run: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed: $(VENV)/.installed-run
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

# The basic plotly.js bundle the pages load (package.json, deviations/core/staticfinders.py). Without
# npm the pages load the full bundle of the plotly package instead; a system check says so.
node_modules/.installed: package.json package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --no-audit --no-fund && touch $@; \
	else \
		echo "npm not found: pages will load the full plotly.js; install npm, then make install"; \
	fi

install: $(VENV)/.installed node_modules/.installed

# The dashboard on the embedded default (SQLite, tasks in-process) with demo data,
# at http://$(HOST):$(PORT)/ (user demo, password demo): `make demo PORT=8080 HOST=0.0.0.0`.
# Links in its emails point to the same address unless DEVIATIONS_SITE_URL says otherwise.
HOST ?= 127.0.0.1
PORT ?= 8000
DEMO_SITE_URL = $(or $(DEVIATIONS_SITE_URL),http://$(HOST):$(PORT))
demo: $(VENV)/.installed-run node_modules/.installed
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0
	DEVIATIONS_SITE_URL=$(DEMO_SITE_URL) $(PY) manage.py demo
	DEVIATIONS_SITE_URL=$(DEMO_SITE_URL) $(PY) manage.py runserver $(HOST):$(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Everything: lint, types, the suite on the embedded default, then the suite's database and
# task tests again on PostgreSQL with a real Celery worker on Redis. Any failure, and
# pytest's exit code 5 (no test collected), stops with a non-zero status.
test: lint
	$(PY) -m pytest
	DATABASE_URL=$(TEST_DATABASE_URL) CELERY_BROKER_URL=$(TEST_BROKER_URL) \
		$(PY) -m pytest -m "not browser" --ignore=tests/stats --ignore=tests/ingest/test_traces.py
