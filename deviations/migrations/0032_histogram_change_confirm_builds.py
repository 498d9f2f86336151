from django.db import migrations, models


class Migration(migrations.Migration):
    """HistogramChange.confirm_builds: the later builds a count change took to confirm (the
    count rule accumulates evidence over up to 8 builds after the change, issue 22 part 5).
    Null for existing rows and for the Hellinger rule's changes."""

    dependencies = [
        ("deviations", "0031_canary_ranks"),
    ]

    operations = [
        migrations.AddField(
            model_name="histogramchange",
            name="confirm_builds",
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
    ]
