from django.contrib import admin
from django.urls import include, path

from deviations import views
from deviations.api import api
from ingest import views as ingest_views

urlpatterns = [
    path("", views.series_list, name="series_list"),
    path("series/<str:name>/", views.series_detail, name="series"),
    path("series/<str:name>/matrix.json", views.matrix_json, name="matrix_json"),
    path(
        "series/<str:name>/functions/<int:function_id>/",
        views.function_detail,
        name="function",
    ),
    path("series/<str:name>/releases/<str:version>/", views.release_detail, name="release"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("upload/", ingest_views.upload, name="upload"),
    path("upload/<uuid:batch>/", ingest_views.upload_status, name="upload_status"),
    path("histograms/", include("deviations.histogram_urls")),
    path("api/", api.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
]
