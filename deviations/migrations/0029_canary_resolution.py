from django.db import migrations, models


class Migration(migrations.Migration):
    """Canary.resolution: 0 (exact) for the canaries that exist, whose checkpoints hold
    exact values; 1e-4 for new ones."""

    dependencies = [
        ("deviations", "0028_release_revisions"),
    ]

    operations = [
        migrations.AddField(
            model_name="canary",
            name="resolution",
            field=models.FloatField(default=0.0),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="canary",
            name="resolution",
            field=models.FloatField(
                default=0.0001,
                help_text="Relative resolution r of the values the tests hold: each "
                "observation is rounded down to a fixed grid whose steps are at most r relative, "
                "which keeps the false-alarm guarantee and bounds the worker's memory and the "
                "checkpoint whatever the run's length; changes smaller than r are not seen. 0: exact "
                "values (memory grows with the run).",
            ),
        ),
    ]
