# Issue 19: the shift rule (docs/statistics.md, "The shift rule") replaces the window
# ("recommended") and segmentation ("segments") rules, whose verdicts kept changing long
# after they looked final; it judges one-run releases, so every release with a done run
# becomes a column. Every series on a retired rule moves to "shifts" ("paper" stays).
# The minimum practical change defaults were 10% and 20 µs, built into the old rules; a
# series still at exactly those defaults takes the new measured ones (2%, 2 µs), a series
# whose owner set other values keeps them. Stored analyses are derived data: dropped here
# and recomputed by `manage.py analyse --all` (or, within two minutes, by the beat's
# `analyse_stale_series`, or the next run that finishes ingesting). Trace alerts now fold
# self and total time of one change into one alert whose key no longer names the metric:
# old alerts take the new key (their triage and the emails already sent are kept) when it
# is free; the next alert pass withdraws what the new rule does not flag.

import django.core.validators
from django.db import migrations, models

RETIRED = ("recommended", "segments")
OLD_DEFAULTS = (0.10, 20.0)
NEW_DEFAULTS = (0.02, 2.0)


def to_shifts(apps, schema_editor):
    series_model = apps.get_model("deviations", "Series")
    series_model.objects.filter(default_rule__in=RETIRED).update(default_rule="shifts")
    series_model.objects.filter(
        min_relative_change=OLD_DEFAULTS[0], min_absolute_change_us=OLD_DEFAULTS[1]
    ).update(min_relative_change=NEW_DEFAULTS[0], min_absolute_change_us=NEW_DEFAULTS[1])
    apps.get_model("deviations", "AnalysisBlock").objects.all().delete()
    apps.get_model("deviations", "SeriesAnalysis").objects.all().delete()
    alert_model = apps.get_model("deviations", "Alert")
    taken = set(alert_model.objects.filter(detector="trace").values_list("key", flat=True))
    for alert in alert_model.objects.filter(detector="trace").order_by("created", "id").only(
        "key", "rule", "metric"
    ):
        # trace:<series>:<function>:<metric>:<rule>:<from>:<to> -> trace:<series>:
        # <function>:<rule>:<from>:<to>
        parts = alert.key.split(":")
        if len(parts) != 7:
            continue
        rule = "shifts" if parts[4] in RETIRED else parts[4]
        key = ":".join([*parts[:3], rule, *parts[5:]])
        if key in taken:
            continue
        taken.add(key)
        alert.key, alert.rule = key, rule
        alert.save(update_fields=["key", "rule"])


def back(apps, schema_editor):
    # The retired rules' arrays are gone: series go back to the segmentation, the analyses
    # are recomputed by the older code; alert keys of the new form are left (the older
    # code withdraws them and records its own).
    apps.get_model("deviations", "Series").objects.filter(default_rule="shifts").update(
        default_rule="segments")
    apps.get_model("deviations", "AnalysisBlock").objects.all().delete()
    apps.get_model("deviations", "SeriesAnalysis").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ('deviations', '0016_subscription_canary_target'),
    ]

    operations = [
        migrations.RemoveField(
            model_name='analysisblock',
            name='p',
        ),
        migrations.RemoveField(
            model_name='analysisblock',
            name='shift',
        ),
        migrations.RemoveField(
            model_name='analysisblock',
            name='z',
        ),
        migrations.RemoveField(
            model_name='seriesanalysis',
            name='global_arrays',
        ),
        migrations.AddField(
            model_name='alert',
            name='early',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_before',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_diff',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_flags',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_hi',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_lo',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_n_after',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_n_before',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_p',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_reach_after',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_reach_before',
            field=models.BinaryField(default=b''),
        ),
        migrations.AddField(
            model_name='analysisblock',
            name='shift_verdict',
            field=models.BinaryField(default=b''),
        ),
        migrations.AlterField(
            model_name='series',
            name='default_rule',
            field=models.CharField(choices=[('shifts', 'level shifts'), ('paper', 'seed 003 paper rule')], default='shifts', help_text='what pages, exports and alerts show unless a page or export asks for another rule', max_length=20),
        ),
        migrations.AlterField(
            model_name='series',
            name='min_absolute_change_us',
            field=models.FloatField(default=2.0, help_text='microseconds; 0 keeps every significant change', validators=[django.core.validators.MinValueValidator(0.0)]),
        ),
        migrations.AlterField(
            model_name='series',
            name='min_relative_change',
            field=models.FloatField(default=0.02, help_text='fraction of the level before the change (0.02 = 2%); 0 keeps every significant change', validators=[django.core.validators.MinValueValidator(0.0), django.core.validators.MaxValueValidator(10.0)]),
        ),
            migrations.RunPython(to_shifts, back),
    ]
