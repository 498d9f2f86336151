# Verdicts gain `appeared` and `vanished` (a function absent from every run of a release is
# not compared as 0 µs), and the recommended rule's window tests leave absent releases out
# (docs/statistics.md, "Appeared and vanished functions"); blocks gain the interval the
# recommended rule shows (`order_lo`, `order_hi`: order statistics for the median). Stored analyses are derived
# data: they are dropped here and recomputed by `manage.py analyse --all` (or, within two
# minutes, by the beat's `analyse_stale_series`, or the next run that finishes ingesting).

from django.db import migrations, models


def drop_stored_analyses(apps, schema_editor):
    apps.get_model("deviations", "AnalysisBlock").objects.all().delete()
    apps.get_model("deviations", "SeriesAnalysis").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [
        ("deviations", "0007_access"),
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
    ]
