"""The site's URLs: each feature's pages, the upload pages, the API, login, admin."""

from django.contrib import admin
from django.urls import include, path

from deviations.api import api
from deviations.core import views as core_views
from deviations.core.login import ThrottledLoginView, ThrottledPasswordResetView

# The admin modules are imported here, where the site's URLs need them, not at every
# process's set-up (deviations.apps.AdminConfig).
admin.autodiscover()

urlpatterns = [
    path("", include("deviations.traces.urls")),
    path("upload/", include("deviations.traces.uploads.urls")),
    path("histograms/", include("deviations.histograms.urls")),
    path("ab/", include("deviations.experiments.ab.urls")),
    path("alerts/", include("deviations.alerts.urls")),
    path("hooks/", include("deviations.alerts.hooks.urls")),
    path("canaries/", include("deviations.experiments.canaries.urls")),
    path("api/", api.urls),
    path("tokens/", core_views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", core_views.revoke, name="revoke_token"),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/password_reset/", ThrottledPasswordResetView.as_view(),
         name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
