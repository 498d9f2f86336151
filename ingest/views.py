"""The upload page: several trace files at once, then a status page that updates itself."""

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from ingest.forms import TraceUploadForm
from ingest.runs import IngestError, ThreadOptions
from ingest.submit import submit_uploads
from ingest.upload_handlers import over_limit


@login_required
def upload(request: HttpRequest) -> HttpResponse:
    wants_json = "application/json" in request.headers.get("Accept", "")
    if request.method != "POST":
        return render(request, "ingest/upload.html", {"form": TraceUploadForm()})
    form = TraceUploadForm(request.POST, request.FILES)
    if reason := over_limit(request):
        form.add_error("files", reason)
    elif form.is_valid():
        data = form.cleaned_data
        try:
            batch, _ = submit_uploads(
                data["series"],
                data["release"],
                [(f.name, f) for f in data["files"]],
                ThreadOptions(data["thread_name"], data["process_name"], data["all_threads"]),
                order=data["order"],
                user=request.user,
            )
        except IngestError as exc:
            form.add_error(None, str(exc))
        else:
            url = reverse("upload_status", args=[batch])
            return JsonResponse({"status_url": url}) if wants_json else redirect(url)
    if wants_json:
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    return render(request, "ingest/upload.html", {"form": form}, status=400)


def upload_status(request: HttpRequest, batch: uuid.UUID) -> HttpResponse:
    return render(request, "ingest/upload_status.html", {"batch": batch})
