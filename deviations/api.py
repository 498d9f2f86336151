"""The REST API (django-ninja): one ``NinjaAPI`` mounting each feature's router.

Reads are open, writes need an API token: ``Authorization: Bearer <token>`` (create one
with ``python manage.py create_api_token``; ``deviations.core.api.TokenAuth``). OpenAPI
document and interactive docs at /api/docs. Every ``UserError`` a service or parser
raises becomes ``{"detail": "<message>"}`` with its status (400, 413) here, in one place.
"""

from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from deviations.alerts.api import alerts_router
from deviations.alerts.api import router as subscriptions_router
from deviations.core.errors import UserError
from deviations.experiments.ab.api import router as ab_router
from deviations.experiments.canaries.api import router as canaries_router
from deviations.histograms.api import router as histograms_router
from deviations.traces.api import router as traces_router

api = NinjaAPI(
    title="deviations API",
    version="1",
    description=(
        "Upload Chromium traces and Telemetry histograms from CI, read runs, series, "
        "changes; triage and subscribe. Writes need `Authorization: Bearer <token>`."
    ),
    urls_namespace="api",
)


@api.exception_handler(UserError)
def user_error(request: HttpRequest, exc: UserError) -> HttpResponse:
    return api.create_response(request, {"detail": exc.message}, status=exc.status)


api.add_router("", traces_router)
api.add_router("/histograms", histograms_router)
api.add_router("/histograms", subscriptions_router)
api.add_router("/alerts", alerts_router)
api.add_router("/ab", ab_router)
api.add_router("/canaries", canaries_router)
