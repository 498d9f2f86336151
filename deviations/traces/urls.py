"""Pages of trace series: the series list, a series' matrix, function, release and run pages."""

from django.urls import path

from deviations.traces import views

urlpatterns = [
    path("", views.series_list, name="series_list"),
    path("series/<str:name>/", views.series_detail, name="series"),
    path("series/<str:name>/settings/", views.series_settings, name="series_settings"),
    path("series/<str:name>/matrix.json", views.matrix_json, name="matrix_json"),
    path(
        "series/<str:name>/functions/<int:function_id>/",
        views.function_detail,
        name="function",
    ),
    path("series/<str:name>/functions/<int:function_id>/direction/",
         views.set_metric_direction, name="metric_direction"),
    path("series/<str:name>/releases/<str:version>/", views.release_detail, name="release"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("series/<str:name>/compare/", views.compare_releases, name="compare"),
    path("series/<str:name>/compare/precision/", views.release_precision,
         name="release_precision"),
    path("series/<str:name>/releases/<str:version>/annotations/", views.annotate_release,
         name="annotate_release"),
    path("series/<str:name>/annotations/<int:annotation_id>/delete/",
         views.delete_release_annotation, name="delete_release_annotation"),
    path("runs/<int:run_id>/file", views.run_file, name="run_file"),
]
