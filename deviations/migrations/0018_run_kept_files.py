# Trace files are kept whole in the trace storage under their sha256 (issues 21 and 24):
# Run.upload (a pending upload in MEDIA_ROOT/pending-traces/, deleted once ingested)
# becomes Run.file_stored (the object traces/<sha[:2]>/<sha> of storages["traces"], a
# local folder or S3-compatible object storage) and Run.file_removed (when retention
# deleted it). The uploads waiting for a worker move into the trace storage here.

from django.core.files import File
from django.core.files.storage import default_storage, storages
from django.db import migrations, models


def move_pending_uploads(apps, schema_editor):
    Run = apps.get_model("deviations", "Run")
    traces = storages["traces"]
    for run in Run.objects.exclude(upload="").iterator():
        name = f"traces/{run.sha256[:2]}/{run.sha256}"
        try:
            with default_storage.open(run.upload.name, "rb") as stream:
                if not traces.exists(name):
                    traces.save(name, File(stream))
        except FileNotFoundError:
            continue  # lost already: its worker fails it and sending it again retries it
        Run.objects.filter(pk=run.pk).update(file_stored=True)
        default_storage.delete(run.upload.name)


class Migration(migrations.Migration):

    dependencies = [
        ('deviations', '0017_shift_rule'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='file_stored',
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name='run',
            name='file_removed',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(move_pending_uploads, migrations.RunPython.noop),
        migrations.RemoveField(
            model_name='run',
            name='upload',
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['sha256'], name='run_sha256'),
        ),
    ]
