"""The trace upload page and its status page, included at /upload/."""

from django.urls import path

from deviations.traces.uploads import views

urlpatterns = [
    path("", views.upload, name="upload"),
    path("check/", views.upload_check, name="upload_check"),
    path("<uuid:batch>/", views.upload_status, name="upload_status"),
]
