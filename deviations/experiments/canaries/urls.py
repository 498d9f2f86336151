"""Canary pages, included at /canaries/ (namespace ``canaries``)."""

from django.urls import path

from deviations.experiments.canaries import views

app_name = "canaries"

urlpatterns = [
    path("", views.canary_list, name="list"),
    path("new/", views.canary_new, name="new"),
    path("<int:canary_id>/", views.canary_detail, name="detail"),
    path("<int:canary_id>/live.json", views.canary_live, name="live"),
    path("<int:canary_id>/continue/", views.canary_continue, name="continue"),
    path("<int:canary_id>/subscribe/", views.canary_subscribe, name="subscribe"),
]
