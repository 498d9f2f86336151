# Issue 12: the segments rule (docs/statistics.md §6c) becomes a rule of the dashboard and
# the default of every series that did not choose another one. Series created or migrated
# since 0011 hold "recommended" whether an owner chose it or it was the default: the two
# cannot be told apart, so every "recommended" becomes "segments" (an owner who chose the
# window rule sets it again in the admin or with PATCH /api/series/<name>); "paper" was
# always a choice and stays. Stored analyses lack the new rule's arrays: they are derived
# data, dropped here and recomputed by `manage.py analyse --all` (or, within two minutes,
# by the beat's `analyse_stale_series`, or the next run that finishes ingesting).

from django.db import migrations, models


def segments_by_default(apps, schema_editor):
    apps.get_model("deviations", "Series").objects.filter(default_rule="recommended").update(
        default_rule="segments")
    apps.get_model("deviations", "AnalysisBlock").objects.all().delete()
    apps.get_model("deviations", "SeriesAnalysis").objects.all().delete()


def window_rule_back(apps, schema_editor):
    apps.get_model("deviations", "Series").objects.filter(default_rule="segments").update(
        default_rule="recommended")


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
