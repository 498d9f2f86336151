"""Stop an upload as soon as one file passes the trace size limit, before it fills the disk."""

from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload

from deviations.core.errors import TooLargeError


class TraceSizeLimitHandler(FileUploadHandler):
    """Counts each file's bytes as they arrive. Over ``DEVIATIONS_MAX_TRACE_BYTES`` the rest
    of the request is read and thrown away instead of stored, and ``check_upload_size(request)``
    names the file for the view to answer with a clear error."""

    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > settings.DEVIATIONS_MAX_TRACE_BYTES:
            self.request.trace_over_limit = (  # type: ignore[union-attr]
                f"{self.file_name}: over the limit of "
                f"{settings.DEVIATIONS_MAX_TRACE_BYTES:,} bytes"
            )
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def check_upload_size(request: Any) -> None:
    """``TooLargeError`` naming the file when an upload of this request was cut off."""
    reason: str | None = getattr(request, "trace_over_limit", None)
    if reason is not None:
        raise TooLargeError(reason)
