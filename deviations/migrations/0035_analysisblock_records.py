from django.db import migrations, models


def external_storage(apps, schema_editor):  # type: ignore[no-untyped-def]
    """On PostgreSQL, ``records`` is stored uncompressed out of line (``STORAGE
    EXTERNAL``): a ``substring`` of it then fetches only the TOAST chunk it needs (a
    compressed value is decompressed from its start). Other databases ignore it."""
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("deviations", "AnalysisBlock")._meta.db_table)
    schema_editor.execute(f"ALTER TABLE {table} ALTER COLUMN records SET STORAGE EXTERNAL")


def default_storage(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Nothing to undo: the column goes with the field."""


class Migration(migrations.Migration):
    """AnalysisBlock.records: the median blocks' rows as row-major records of the fields
    the matrix's default view reads (shift rule, median), so that the matrix's shown rows
    read one record per row and block instead of whole blocks (issue 24). Null in the
    blocks already stored: those are read the old way until an analysis rewrites them
    (`manage.py analyse --full`: all)."""

    dependencies = [
        ("deviations", "0034_alert_reported"),
    ]

    operations = [
        migrations.AddField(
            model_name="analysisblock",
            name="records",
            field=models.BinaryField(null=True),
        ),
        migrations.RunPython(external_storage, default_storage),
    ]
