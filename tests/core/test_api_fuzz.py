"""Every write endpoint of the API, sent mutated (issue 23): a 4xx with a detail, never a 500.

The endpoints are read from the API's own OpenAPI schema, and each must be fuzzed here in
one of three ways (``test_every_write_endpoint_is_fuzzed`` fails on a new one until it is):
a JSON body (seeded mutations of a valid body, ``tests/ingest/mutations.py``), a multipart
upload (mutated files of the endpoint's format under hostile names, with hostile form
fields), or no body at all. Every endpoint, reads included, is also sent hostile path
values (integers past 64 bits, NUL, long and odd names). Runs in the PostgreSQL pass too,
where NUL, lengths and integer ranges are enforced.
"""

from __future__ import annotations

import io
import json
import random
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from deviations.core.models import ApiToken
from tests.ingest.mutations import cases, mutate
from tests.ingest.test_fuzz import _ab_seeds, _histogram_seeds, _results_seeds, _trace_seeds

pytestmark = pytest.mark.django_db

WRITES = ("post", "patch", "put", "delete")


def _operations() -> list[tuple[str, str, list[str]]]:
    """(METHOD, path, request body content types) of every operation of the API."""
    schema = _schema()
    return [(method.upper(), path, list(op.get("requestBody", {}).get("content", {})))
            for path, ops in schema["paths"].items() for method, op in ops.items()]


def _schema() -> dict[str, Any]:
    from deviations.api import api

    return api.get_openapi_schema()


def _form_fields(method: str, path: str) -> set[str]:
    """The fields of a multipart operation's form, as its schema lists them."""
    body = _schema()["paths"][path][method.lower()]["requestBody"]["content"]
    return set(body["multipart/form-data"]["schema"]["properties"])


# Valid bodies, by operation; {ids} are filled from the world the test builds.
BODIES = {
    "PATCH /api/series/{name}": {"default_rule": "paper", "min_relative_change": 0.05,
                                 "min_absolute_change_us": 3,
                                 "log_url_template": "https://g.example/{from}..{to}"},
    "PATCH /api/series/{name}/releases/{version}": {"revision": "0a1b2c3d"},
    "PATCH /api/series/{name}/metric": {"metric": "ops", "direction": "higher_is_better",
                                        "unit": "ops/s"},
    "POST /api/series/{name}/releases/{version}/annotations": {"text": "new bot"},
    "POST /api/histograms/changes/{change_id}/state": {"state": "invalid"},
    "POST /api/histograms/annotations": {"probe": "GC_MS", "build_id": "2", "text": "note"},
    "POST /api/histograms/subscriptions": {"email": "ci@example.org", "pattern": "GC_*",
                                           "target": "histogram", "digest": False},
    "POST /api/alerts/triage": {"alerts": ["{alert}"], "status": "acknowledged",
                                "bug_url": "https://b/1", "note": "n"},
    "POST /api/canaries": {"name": "x", "bad": "higher", "alpha": 0.05, "unit": "ms",
                           "resolution": 1e-4, "owners": ["o@example.org"]},
    "POST /api/canaries/{canary_id}/observations": {"batch": "b", "arm": "A",
                                                    "values": [1.5, 2.0, 3.25]},
    "POST /api/canaries/{canary_id}/subscribe": {"email": "ci@example.org"},
    "POST /api/webhooks": {"url": "https://hooks.example.org/x", "pattern": "s*",
                           "target": "series", "format": "slack", "secret": "k"},
    "PUT /api/bug-templates": {"target": "series", "family": "s", "kind": "github",
                               "base_url": "https://github.com/o/r", "labels": "perf"},
    "POST /api/alerts/{alert_id}/nudge": {"side": "earlier"},
    "POST /api/alerts/groups/{group_id}/upstream": {"upstream": "{upstream}"},
    # The bisect service's report, with the bisect's own token (the world's "bisect_auth").
    "POST /api/bisects/{bisect_id}": {"status": "done", "culprit_revision": "abc123",
                                      "url": "https://ci.example.org/1", "message": "found"},
}
# Multipart uploads: the file fields, their seeds, and the form fields with valid values.
UPLOADS = {
    "POST /api/series/{name}/releases/{version}/runs": (
        {"file": _trace_seeds},
        {"revision": "0a1b2c3d", "thread_name": "CrRendererMain", "process_name": "Renderer",
         "all_threads": "false", "order": "7"}),
    "POST /api/series/{name}/results": (
        {"file": lambda: _results_seeds("csv") + _results_seeds("google-benchmark")},
        {"release": "9.0", "order": "9", "format": "csv", "revision": "0a1b2c3d"}),
    "POST /api/histograms/upload": ({"file": _histogram_seeds},
                                    {"probe": "GC_MS", "build_id": "20260101000000"}),
    "POST /api/ab/runs": ({"file": _ab_seeds, "aa": _ab_seeds},
                          {"host": "bench-1", "min_change": "2.5"}),
}
# No body: their path is what they take (and is fuzzed below with every endpoint's).
NO_BODY = {
    "DELETE /api/runs/{run_id}", "DELETE /api/series/{name}",
    "DELETE /api/series/{name}/releases/{version}",
    "DELETE /api/series/{name}/annotations/{annotation_id}",
    "DELETE /api/histograms/annotations/{annotation_id}",
    "POST /api/canaries/{canary_id}/continue",
    "DELETE /api/webhooks/{hook_id}", "POST /api/webhooks/{hook_id}/test",
    "DELETE /api/bug-templates/{template_id}", "POST /api/alerts/{alert_id}/bisect",
    "DELETE /api/alerts/groups/{group_id}/upstream",
}

HOSTILE_FIELDS = ["", "a\x00b", "x" * 5_000, "-1", "1e309", "nan", "99999999999999999999",
                  "<b>", "../x", "😀", " ", "true"]
HOSTILE_PATHS = ["0", "-1", "2147483648", "9223372036854775808", "99999999999999999999999",
                 "a%00b", "a" * 300, "%F0%9F%98%80", "%2e%2e", "a%2Fb", "%20", "1.5", "null"]
FILE_NAMES = ["case.json", "../../x.json", "a\x00b.json", "n" * 300, "", "é.csv"]


def test_every_write_endpoint_is_fuzzed() -> None:
    writes = {f"{m} {p}" for m, p, _ in _operations() if m.lower() in WRITES}
    covered = set(BODIES) | set(UPLOADS) | NO_BODY
    assert writes - covered == set(), "new write endpoints: give them a seed here"
    assert covered - writes == set(), "endpoints that are gone"
    for method, path, types in _operations():
        key = f"{method} {path}"
        if key in BODIES:
            assert types == ["application/json"], key
        if key in UPLOADS:
            assert types == ["multipart/form-data"], key
            files, fields = UPLOADS[key]
            assert _form_fields(method, path) == set(files) | set(fields), (
                f"{key}: every form field is fuzzed")


@pytest.fixture
def world(db: Any) -> dict[str, Any]:
    """A staff user's token and one of everything the endpoints act on."""
    from deviations.alerts.hooks.models import Bisect, BugTemplate, Webhook
    from deviations.alerts.hooks.services import bisect_token
    from deviations.alerts.models import Alert
    from deviations.alerts.recording import record
    from deviations.experiments.canaries import services as canaries
    from deviations.histograms.models import HistogramChange, Probe
    from deviations.traces.models import Release, Series
    from deviations.traces.uploads.results import store_results
    from tests.alerts.test_groups import trace

    user = get_user_model().objects.create_user("ci", "ci@example.org", "pw", is_staff=True)
    series = Series.objects.create(name="s")
    for v in ("1", "2", "3"):
        Release.objects.create(series=series, version=v)
    record([trace(series, "Paint", "2", "3"), trace(series, "Layout", "1", "2")])
    probe = Probe.objects.create(name="GC_MS")
    change = HistogramChange.objects.create(
        probe=probe, build_id="2", sort_key="2", previous_build_id="1", distance=0.3,
        cutoff=0.1, kind="shift", rule="adaptive", edges=b"", before=b"", after=b"",
    )
    store_results("bench", b"release,metric,value,unit\n1.0,ops,5,ops/s\n1.0,ops,6,ops/s\n",
                  "bench.csv", analyse=False)
    alert = Alert.objects.get(subject="Paint")
    upstream = Alert.objects.get(subject="Layout").group_id
    hook = Webhook.objects.create(owner=user, url="https://hooks.example.org/y", pattern="*")
    template = BugTemplate.objects.create(family="s", kind="github",
                                          base_url="https://github.com/o/r")
    bisect = Bisect.objects.create(alert=alert, requested_by=user)
    return {"token": ApiToken.issue(user, "CI")[1], "name": "s", "version": "2",
            "alert": alert.pk, "alert_id": alert.pk, "group_id": alert.group_id,
            "upstream": upstream, "change_id": change.pk,
            "canary_id": canaries.create_canary("c", bad="higher", user=user).pk,
            "run_id": 1, "annotation_id": 1, "hook_id": hook.pk, "template_id": template.pk,
            "bisect_id": bisect.pk, "bisect_auth": bisect_token(bisect.pk)}


def _url(path: str, world: dict[str, Any]) -> str:
    url = re.sub(r"\{(\w+)\}", lambda m: str(world[m.group(1)]), path)
    return url.replace("/api/series/s/metric", "/api/series/bench/metric")


def _fill(body: Any, world: dict[str, Any]) -> Any:
    text = json.dumps(body)
    for name in ("alert", "upstream"):
        text = text.replace(f'"{{{name}}}"', str(world[name]))
    return json.loads(text)


def test_mutated_json_bodies_never_answer_500(client: Any, world: dict[str, Any]) -> None:
    client.raise_request_exception = False
    auth = {"Authorization": f"Bearer {world['token']}"}
    codes: dict[int, int] = {}
    bisect_auth = {"Authorization": f"Bearer {world['bisect_auth']}"}
    for key, body in BODIES.items():
        method, path = key.split(" ")
        send = {"PATCH": client.patch, "PUT": client.put, "POST": client.post}[method]
        seed = json.dumps(_fill(body, world)).encode()
        for i, data in cases([seed], 300, seed=3):
            response = send(_url(path, world), data, content_type="application/json",
                            headers=bisect_auth if "{bisect_id}" in path else auth)
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (key, i, data[:200], response.content[:300])
    assert set(codes) & {200, 201}, codes  # some mutations were still valid bodies
    assert set(codes) - {200, 201}, codes  # and the others were refused


def test_mutated_uploads_never_answer_500(client: Any, world: dict[str, Any]) -> None:
    """Mutated files under hostile names, with the form fields valid or hostile (a NUL in
    a release or host name, numbers out of range)."""
    client.raise_request_exception = False
    auth = {"Authorization": f"Bearer {world['token']}"}
    rng = random.Random(31)
    codes: dict[int, int] = {}
    for key, (files, fields) in UPLOADS.items():
        path = key.split(" ")[1]
        seeds = {name: make() for name, make in files.items()}
        for i in range(40):
            data: dict[str, Any] = dict(fields)
            for name in list(data):
                if rng.random() < 0.3:
                    data[name] = rng.choice(HOSTILE_FIELDS)
            for name, docs in seeds.items():
                if rng.random() < 0.9:
                    upload = io.BytesIO(mutate(rng.choice(docs), rng))
                    upload.name = rng.choice(FILE_NAMES)
                    data[name] = upload
            response = client.post(_url(path, world), data, headers=auth)
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (
                key, i, {k: str(v)[:80] for k, v in data.items()}, response.content[:300])
    assert set(codes) & {200, 201}, codes
    assert set(codes) - {200, 201}, codes


def test_hostile_path_values_never_answer_500(client: Any, world: dict[str, Any]) -> None:
    """Each path parameter of every endpoint, reads included, replaced by hostile values:
    integers past PostgreSQL's 32 and 64 bits were the likeliest 500s."""
    client.raise_request_exception = False
    auth = {"Authorization": f"Bearer {world['token']}"}
    sent = 0
    for method, path, types in _operations():
        for param in re.findall(r"\{(\w+)\}", path):
            for value in HOSTILE_PATHS:
                url = re.sub(r"\{(\w+)\}", lambda m, p=param, v=value:
                             v if m.group(1) == p else str(world[m.group(1)]), path)
                body = "{}" if "application/json" in types else None
                response = client.generic(method, url, body or "",
                                          content_type="application/json", headers=auth)
                sent += 1
                assert response.status_code < 500, (method, url, response.content[:300])
    assert sent > 100, sent
