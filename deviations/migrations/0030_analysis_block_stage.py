from django.db import migrations, models


class Migration(migrations.Migration):
    """AnalysisBlock.stage: blocks of an analysis in chunks stay invisible until its last
    step publishes them (issue 24); every existing block is published (0)."""

    dependencies = [
        ("deviations", "0029_canary_resolution"),
    ]

    operations = [
        migrations.AddField(
            model_name="analysisblock",
            name="stage",
            field=models.BigIntegerField(default=0),
        ),
        migrations.RemoveConstraint(
            model_name="analysisblock",
            name="analysis_block_unique",
        ),
        migrations.AddConstraint(
            model_name="analysisblock",
            constraint=models.UniqueConstraint(
                fields=("series", "metric", "estimator", "release", "row_start", "stage"),
                name="analysis_block_unique",
            ),
        ),
    ]
