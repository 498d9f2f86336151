from django.db import migrations, models


class Migration(migrations.Migration):
    """AnalysisBlock.paper_deviations and shift_deviations: per block, the cells whose
    stored verdict is a deviation (row, verdict, diff, before), so that the matrix ranks
    and filters a window's functions from them instead of reading every cell (issue 24).
    Null in the blocks already stored: a window holding one of those is ranked from every
    cell, as before, until an analysis rewrites them (`manage.py analyse --full`: all)."""

    dependencies = [
        ("deviations", "0032_histogram_change_confirm_builds"),
    ]

    operations = [
        migrations.AddField(
            model_name="analysisblock",
            name="paper_deviations",
            field=models.BinaryField(null=True),
        ),
        migrations.AddField(
            model_name="analysisblock",
            name="shift_deviations",
            field=models.BinaryField(null=True),
        ),
    ]
