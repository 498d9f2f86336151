from django.db import migrations, models

import deviations.traces.models


class Migration(migrations.Migration):

    dependencies = [
        ("deviations", "0027_analysis_attempts"),
    ]

    operations = [
        migrations.AddField(
            model_name="release",
            name="revision",
            field=models.CharField(
                blank=True, max_length=100,
                validators=[deviations.traces.models._validate_revision],
                help_text="commit hash or number the release was built from",
            ),
        ),
        migrations.AddField(
            model_name="series",
            name="log_url_template",
            field=models.CharField(
                blank=True, max_length=500,
                validators=[deviations.traces.models._validate_log_url_template],
                help_text="e.g. https://github.com/o/r/compare/{from}...{to}: links the "
                "commits between two releases' revisions; empty: no link",
            ),
        ),
    ]
