# Issue 12: the segments rule (docs/statistics.md §6c) becomes a rule of the dashboard and
# the default of every series that did not choose another one. Series created or migrated
# since 0011 hold "recommended" whether an owner chose it or it was the default: the two
# cannot be told apart, so every "recommended" becomes "segments" (an owner who chose the
# window rule sets it again in the admin or with PATCH /api/series/<name>); "paper" was
# always a choice and stays. Stored analyses lack the new rule's arrays: they are derived
# data, dropped here and recomputed by `manage.py analyse --all` (or, within two minutes,
# by the beat's `analyse_stale_series`, or the next run that finishes ingesting).

from django.db import migrations, models


def _rekey_trace_alerts(apps, series_ids, old, new):
    """Trace alerts name their rule in their key (``trace:<series>:<function>:<metric>:
    <rule>:<from>:<to>``, ``traces.notify``): those of the series whose rule changes take
    the new rule's key, so a change both rules flag stays the same alert (its triage and
    the emails already sent kept) instead of being withdrawn and alerted again; what only
    the old rule flagged is withdrawn by the next sync."""
    alert_model = apps.get_model("deviations", "Alert")
    prefixes = tuple(f"trace:{pk}:" for pk in series_ids)
    for alert in alert_model.objects.filter(detector="trace", rule=old).only("key", "rule"):
        parts = alert.key.split(":")
        if alert.key.startswith(prefixes) and len(parts) == 7 and parts[4] == old:
            parts[4] = new
            key = ":".join(parts)
            # (Back from a series that used both rules: the newer alert's key is taken.)
            if not alert_model.objects.filter(key=key).exists():
                alert.key, alert.rule = key, new
                alert.save(update_fields=["key", "rule"])


def segments_by_default(apps, schema_editor):
    moved = apps.get_model("deviations", "Series").objects.filter(default_rule="recommended")
    ids = list(moved.values_list("pk", flat=True))
    moved.update(default_rule="segments")
    _rekey_trace_alerts(apps, ids, "recommended", "segments")
    apps.get_model("deviations", "AnalysisBlock").objects.all().delete()
    apps.get_model("deviations", "SeriesAnalysis").objects.all().delete()


def window_rule_back(apps, schema_editor):
    moved = apps.get_model("deviations", "Series").objects.filter(default_rule="segments")
    ids = list(moved.values_list("pk", flat=True))
    moved.update(default_rule="recommended")
    _rekey_trace_alerts(apps, ids, "segments", "recommended")


class Migration(migrations.Migration):
    dependencies = [
        ("deviations", "0012_canaries"),
    ]

    operations = [
        migrations.AlterField(
            model_name="series",
            name="default_rule",
            field=models.CharField(
                choices=[("segments", "segmentation (default)"),
                         ("recommended", "window rule"), ("paper", "seed 003 paper rule")],
                default="segments",
                help_text="what pages, exports and alerts show unless a page or export asks "
                "for another rule",
                max_length=20),
        ),
        migrations.RunPython(segments_by_default, window_rule_back),
    ]
