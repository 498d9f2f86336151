from django.db import migrations, models


class Migration(migrations.Migration):
    """Canary.method: the rank betting test ("ranks", issue 22 part 1) is a choice and the
    default for new canaries; existing canaries keep the method they were created with
    (an AlterField changes no row)."""

    dependencies = [
        ("deviations", "0030_analysis_block_stage"),
    ]

    operations = [
        migrations.AlterField(
            model_name="canary",
            name="method",
            field=models.CharField(
                choices=[
                    ("ranks", "rank betting test (sequential ranks; fastest on shifts; reject only)"),
                    ("dkw", "distribution functions (time-uniform DKW bands; any difference; tau)"),
                    ("signs", "sign test on pairs (mixture martingale; faster on shifts; reject only)"),
                ],
                default="ranks",
                help_text="The sequential test that decides (docs/statistics.md, 'Canaries'); "
                "the bands are drawn either way.",
                max_length=5,
            ),
        ),
    ]
