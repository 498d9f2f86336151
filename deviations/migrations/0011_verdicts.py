# Verdicts gain `appeared` and `vanished` (a function absent from every run of a release is
# not compared as 0 µs), and the recommended rule's window tests leave absent releases out
# (docs/statistics.md, "Appeared and vanished functions"); blocks gain the interval the
# recommended rule shows (`order_lo`, `order_hi`: order statistics for the median). Series
# gain their default rule (the recommended one unless set) and a minimum practical change. Stored analyses are derived
# data: they are dropped here and recomputed by `manage.py analyse --all` (or, within two
# minutes, by the beat's `analyse_stale_series`, or the next run that finishes ingesting).

from django.db import migrations, models


def drop_stored_analyses(apps, schema_editor):
    apps.get_model("deviations", "AnalysisBlock").objects.all().delete()
    apps.get_model("deviations", "SeriesAnalysis").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("deviations", "0010_alerts"),
    ]

    operations = [
        migrations.RunPython(drop_stored_analyses, migrations.RunPython.noop),
        migrations.AddField(
            model_name="analysisblock",
            name="order_lo",
            field=models.BinaryField(default=b""),
        ),
        migrations.AddField(
            model_name="analysisblock",
            name="order_hi",
            field=models.BinaryField(default=b""),
        ),
        migrations.AddField(
            model_name="series",
            name="default_rule",
            field=models.CharField(
                choices=[("recommended", "recommended"), ("paper", "paper (seed 003)")],
                default="recommended", max_length=20),
        ),
        migrations.AddField(
            model_name="series",
            name="min_absolute_change_us",
            field=models.FloatField(default=20.0, help_text="microseconds"),
        ),
        migrations.AddField(
            model_name="series",
            name="min_relative_change",
            field=models.FloatField(
                default=0.1, help_text="fraction of the earlier release's estimate (0.10 = 10%)"),
        ),
    ]
