"""Locks between the threads and processes of one site on one machine (the embedded
default, where tasks run in the web processes)."""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from django.conf import settings


def site_lock_folder() -> Path:
    """Where the in-process lock files live: the machine's temporary folder, one
    sub-folder per site (its database and media folder), which every thread and process
    of that site shares; not the media folder, which holds only what users sent."""
    site = f"{settings.DATABASES['default']['NAME']}|{settings.MEDIA_ROOT}"
    folder = (Path(tempfile.gettempdir()) / "deviations-locks"
              / hashlib.sha256(site.encode()).hexdigest()[:16])
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder
