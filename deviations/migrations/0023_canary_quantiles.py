from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("deviations", "0022_histogram_count_changes"),
    ]

    operations = [
        migrations.AddField(
            model_name="canary",
            name="quantiles",
            field=models.JSONField(
                blank=True, default=list,
                help_text="Quantiles the canary is judged on, e.g. [0.5, 0.9, 0.99]: each "
                "gets an anytime-valid decision (Bonferroni over them), and these decide the "
                "canary instead of the distribution-function test. Empty: not used.",
            ),
        ),
    ]
