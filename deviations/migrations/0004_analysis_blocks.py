# The stored analysis moves from eight whole-matrix rows per series to one summary row and
# per-release blocks (docs/architecture.md, "Analysis: stored matrices, incremental
# updates"). Stored analyses are derived data: they are dropped here and recomputed by the
# next `manage.py analyse` (or the next run that finishes ingesting).

import django.db.models.deletion
from django.db import migrations, models


def _binary(*names):
    return [(name, models.BinaryField()) for name in names]


class Migration(migrations.Migration):
    dependencies = [
        ("deviations", "0003_histograms"),
    ]

    operations = [
        migrations.DeleteModel(name="SeriesAnalysis"),
        migrations.CreateModel(
            name="SeriesAnalysis",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("generation", models.BigIntegerField()),
                *_binary("release_ids", "function_ids", "run_ids", "run_counts", "params",
                         "global_arrays"),
                ("snapshot_at", models.DateTimeField()),
                ("series", models.OneToOneField(
                    on_delete=django.db.models.deletion.CASCADE, related_name="analysis",
                    to="deviations.series")),
            ],
            options={"verbose_name_plural": "series analyses"},
        ),
        migrations.CreateModel(
            name="AnalysisBlock",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                           verbose_name="ID")),
                ("metric", models.CharField(max_length=10)),
                ("estimator", models.CharField(max_length=10)),
                ("row_start", models.IntegerField()),
                ("rows", models.IntegerField()),
                *_binary("estimate", "lo", "hi", "n", "gap", "diff", "diff_lo", "diff_hi",
                         "paper_p", "paper_verdict", "z", "p", "shift"),
                ("release", models.ForeignKey(
                    on_delete=django.db.models.deletion.CASCADE, related_name="+",
                    to="deviations.release")),
                ("series", models.ForeignKey(
                    on_delete=django.db.models.deletion.CASCADE, related_name="+",
                    to="deviations.series")),
            ],
            options={
                "constraints": [models.UniqueConstraint(
                    fields=("series", "metric", "estimator", "release", "row_start"),
                    name="analysis_block_unique")],
            },
        ),
    ]
