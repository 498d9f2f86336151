"""python manage.py prepare_storage"""

import uuid
from io import BytesIO
from typing import Any

from django.core.files.storage import storages
from django.core.management.base import CommandError

from deviations.management import base


class Command(base.Command):
    help = (
        "Make the trace storage ready: create its S3 bucket (DEVIATIONS_S3_BUCKET) or its "
        "local folder (MEDIA_ROOT/traces) if missing, then write, read back and delete a "
        "probe object. Run it once when deploying (docker-compose.yml's migrate service "
        "does); exits with status 1 if the storage cannot be used."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        store = storages["traces"]
        name = f"traces/probe-{uuid.uuid4().hex}"
        data = b"deviations: a probe of the trace storage\n"
        try:
            what = store.prepare()
            store.put(name, BytesIO(data))
            with store.reader(name) as source:
                back = source.read_bytes() if hasattr(source, "read_bytes") else source.read()
            store.delete(name)
        except Exception as exc:  # any failure of the storage is the answer: say it
            raise CommandError(f"the trace storage cannot be used: {exc}") from exc
        if back != data:
            raise CommandError("the trace storage gave back other bytes than it was given")
        self.stdout.write(f"trace storage ready: {what}")
