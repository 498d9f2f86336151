"""Histogram pages, included at /histograms/ (namespace ``histograms``)."""

from django.urls import path

from deviations.alerts import views as alert_views
from deviations.histograms import views

app_name = "histograms"

urlpatterns = [
    path("", views.probe_list, name="list"),
    path("probes/<int:probe_id>/", views.probe_detail, name="probe"),
    path("changes/", views.changes_feed, name="changes"),
    path("changes/<int:change_id>/state/", views.set_state, name="set_state"),
    path("subscriptions/", alert_views.subscriptions, name="subscriptions"),
    path("unsubscribe/<str:token>/", alert_views.unsubscribe, name="unsubscribe"),
    path("confirm/<str:token>/", alert_views.confirm, name="confirm"),
    path("upload/", views.upload, name="upload"),
    path("probes/<int:probe_id>/annotations/", views.annotate_build, name="annotate_build"),
    path("annotations/<int:annotation_id>/delete/", views.delete_build_annotation,
         name="delete_build_annotation"),
]
