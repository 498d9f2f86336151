"""Alert pages, included at /alerts/ (namespace ``alerts``)."""

from django.urls import path

from deviations.alerts import views

app_name = "alerts"

urlpatterns = [
    path("", views.alert_list, name="list"),
    path("groups/<int:group_id>/", views.group_detail, name="group"),
    path("groups/<int:group_id>/triage/", views.group_triage, name="triage"),
    path("<int:alert_id>/", views.alert_detail, name="alert"),
    path("<int:alert_id>/notes/", views.add_note, name="note"),
    path("<int:alert_id>/nudge/", views.nudge, name="nudge"),
    path("groups/<int:group_id>/upstream/", views.link_upstream, name="upstream"),
    path("groups/<int:group_id>/upstream/remove/", views.unlink_upstream,
         name="upstream_remove"),
    path("ignored/", views.ignored_list, name="ignored"),
    path("ignore/", views.ignore, name="ignore"),
    path("ignored/<int:ignore_id>/undo/", views.unignore, name="unignore"),
]
