"""The REST API (django-ninja): one ``NinjaAPI`` mounting each feature's router.

Reads are open, writes need an API token: ``Authorization: Bearer <token>`` (create one
with ``python manage.py create_api_token``; ``deviations.core.api.TokenAuth``). OpenAPI
document and interactive docs at /api/docs. Every ``UserError`` a service or parser
raises becomes ``{"detail": "<message>"}`` with its status (400, 413) here, in one place.
"""

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from ninja import NinjaAPI, Swagger
from ninja.openapi.docs import _csrf_needed

from deviations.alerts.api import alerts_router
from deviations.alerts.api import router as subscriptions_router
from deviations.alerts.hooks.api import router as hooks_router
from deviations.core.errors import UserError
from deviations.experiments.ab.api import router as ab_router
from deviations.experiments.canaries.api import router as canaries_router
from deviations.histograms.api import router as histograms_router
from deviations.traces.api import router as traces_router


class LocalSwagger(Swagger):
    """Swagger UI from ninja's own template and static files (in settings' template and
    static folders), as ninja renders it when listed in INSTALLED_APPS, which the project
    avoids: the app would import ninja and pydantic at every Django start (settings)."""

    def render_page(self, request: HttpRequest, api: Any, **kwargs: Any) -> HttpResponse:
        self.settings["url"] = self.get_openapi_url(api, kwargs)
        context = {"swagger_settings": json.dumps(self.settings, indent=1), "api": api,
                   "add_csrf": _csrf_needed(api)}
        return render(request, self.template, context)


api = NinjaAPI(
    title="deviations API",
    version="1",
    description=(
        "Upload Chromium traces and Telemetry histograms from CI, read runs, series, "
        "changes; triage and subscribe. Writes need `Authorization: Bearer <token>`."
    ),
    urls_namespace="api",
    docs=LocalSwagger(),
)


@api.exception_handler(UserError)
def user_error(request: HttpRequest, exc: UserError) -> HttpResponse:
    return api.create_response(request, {"detail": exc.message}, status=exc.status)


api.add_router("", traces_router)
api.add_router("/histograms", histograms_router)
api.add_router("/histograms", subscriptions_router)
api.add_router("/alerts", alerts_router)
api.add_router("", hooks_router)
api.add_router("/ab", ab_router)
api.add_router("/canaries", canaries_router)
