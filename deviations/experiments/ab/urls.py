"""A/B pages, included at /ab/ (namespace ``ab``)."""

from django.urls import path

from deviations.experiments.ab import views

app_name = "ab"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/min-change/", views.set_min_change, name="set_min_change"),
    path("hosts/<str:name>/", views.host_detail, name="host"),
]
