"""A full disk (issue 23): the embedded server's trace folder is a tmpfs of 512 KiB, really
full. An upload that does not fit answers 507 with a readable message naming the file and
leaves no byte behind; one that fits is stored. Before, the server answered 500 and the
partial file stayed in the media folder.

The tmpfs is mounted in a mount namespace of the server's own (``unshare``), so the test
changes nothing of the machine's mounts; it is skipped where namespaces are not allowed."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import renderer_events
from tests.traces.uploads.test_embedded_killed import Site, _multipart


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs none /mnt"],
                           capture_output=True, check=False)
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _namespaces(),
    reason="needs unshare -rm (user and mount namespaces) to mount a small tmpfs",
)


def test_a_full_disk_answers_507_and_keeps_nothing_of_the_file(tmp_path: Path) -> None:
    site = Site(tmp_path)
    site.media.mkdir()
    site.run("migrate", "--noinput")
    site.run("shell", "-c",
             "from django.contrib.auth.models import User; User.objects.create_user('ci')")
    token = site.run("create_api_token", "ci").strip().splitlines()[-1]
    done, listing = tmp_path / "done", tmp_path / "listing"
    script = (
        f'mount -t tmpfs -o size=512k tmpfs "{site.media}" && '
        f'{{ {" ".join(site.manage)} runserver --noreload 127.0.0.1:{site.port} & }} && '
        f'while [ ! -e "{done}" ]; do sleep 0.1; done; kill -TERM $!; wait $!; '
        f'find "{site.media}" -type f > "{listing}"'
    )
    shell = subprocess.Popen(["unshare", "-rm", "sh", "-c", script], env=site.env,
                             cwd=Path(__file__).resolve().parents[3], stdout=site.log,
                             stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{site.port}/api/series", timeout=2)
                break
            except OSError:
                assert shell.poll() is None, (tmp_path / "server.log").read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)

        def upload(name: str, data: bytes) -> tuple[int, dict[str, object]]:
            body, ctype = _multipart(name, data)
            request = urllib.request.Request(
                f"http://127.0.0.1:{site.port}/api/series/full/releases/1.0/runs", body,
                headers={"Authorization": f"Bearer {token}", "Content-Type": ctype})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310
                    return response.status, json.load(response)
            except urllib.error.HTTPError as err:
                return err.code, json.load(err)

        big = json.dumps({"traceEvents": renderer_events(
            [(f"F{i}", i * 10, 5) for i in range(20_000)])}).encode()  # ~2 MB
        assert len(big) > 1024 * 1024
        status, answer = upload("big.json", big)
        assert status == 507, answer
        assert str(answer["detail"]).startswith(
            "big.json: the server has no room left to store this file")
        small = json.dumps({"traceEvents": renderer_events([("Paint", 0, 10)])}).encode()
        status, answer = upload("small.json", small)
        assert status == 201, answer
        assert answer["status"] == "done"
    finally:
        done.touch()
        shell.wait(timeout=60)
        site.log.close()
    sha = hashlib.sha256(small).hexdigest()
    assert listing.read_text().split() == [str(site.media / "traces" / sha[:2] / sha)]
