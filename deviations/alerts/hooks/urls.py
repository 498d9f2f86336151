"""Pages of the hooks, included at /hooks/ (namespace ``hooks``)."""

from django.urls import path

from deviations.alerts.hooks import views

app_name = "hooks"

urlpatterns = [
    path("", views.webhooks, name="webhooks"),
    path("<int:hook_id>/delete/", views.webhook_delete, name="delete"),
    path("<int:hook_id>/test/", views.webhook_test, name="test"),
    path("bugs/", views.bug_templates, name="bugs"),
    path("bugs/<int:template_id>/delete/", views.bug_template_delete, name="bug_delete"),
    path("alerts/<int:alert_id>/bisect/", views.start_bisect, name="bisect"),
]
