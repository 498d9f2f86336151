"""What the README and docs/deploy.md promise, checked against what the project does
(issue 23's first hour: the README's count of demo groups was wrong, `make demo` installed
the test tools, deploy.md said nothing of body buffering nor of at-most-once emails)."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from tests.conftest import ROOT

README = (ROOT / "README.md").read_text()


@pytest.mark.django_db(transaction=True)  # the demo's histogram detection runs on commit
def test_the_readmes_demo_groups_are_the_demos() -> None:
    from deviations.alerts.models import AlertGroup
    from deviations.management.commands.demo import RESULTS_SERIES, SERIES

    call_command("demo", stdout=io.StringIO())
    said = re.search(r"are (\w+) groups on the home page, beside the\s+benchmark series' "
                     r"(\w+) .*? and the demo probes' (\w+) histogram changes", README, re.S)
    assert said is not None
    words = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
    trace, results, histogram = (words[w] for w in said.groups())
    groups = AlertGroup.objects
    assert groups.filter(detector="trace", family=SERIES).count() == trace
    assert groups.filter(detector="trace", family=RESULTS_SERIES).count() == results
    assert groups.filter(detector="histogram").count() == histogram


def test_make_demo_installs_the_runtime_only_and_links_its_own_address() -> None:
    makefile = (ROOT / "Makefile").read_text()
    demo = re.search(r"^demo: (.*)$((?:\n\t.*)+)", makefile, re.M)
    assert demo is not None
    assert "$(VENV)/.installed-run" in demo.group(1).split()
    assert "$(VENV)/.installed" not in demo.group(1).split()  # the test tools' stamp
    # Its emails link to the address it serves (they said port 8000 whatever PORT was).
    assert "DEMO_SITE_URL = $(or $(DEVIATIONS_SITE_URL),http://$(HOST):$(PORT))" in makefile
    recipe = demo.group(2)
    assert "DEVIATIONS_SITE_URL=$(DEMO_SITE_URL) $(PY) manage.py demo" in recipe
    assert "$(PY) manage.py runserver $(HOST):$(PORT)" in recipe


def test_deploy_says_bodies_are_buffered_and_emails_sent_at_most_once() -> None:
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    assert "**The proxy must buffer request bodies.**" in deploy
    assert "proxy_request_buffering on;" in deploy
    assert "**Emails are sent at most once.**" in deploy
