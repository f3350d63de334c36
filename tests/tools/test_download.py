"""
Tests for minbert/tools/download.py's download_file: every dataset file is streamed to a `.part` name and renamed.

Oracle (c), properties: byte-equality with the served file, and which names exist during and after a download.
The files come from a throwaway HTTP server on 127.0.0.1 that shuts itself down after the test (or after 60 s at
the latest); nothing here touches the internet.
"""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest

from minbert.tools import download


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def server():
    """A bounded local HTTP server: serves `files` ({url path: bytes}), 404 for anything else, for paths in `drop`
    claims 1000 more bytes than it sends, and for paths in `gate` ({path: (half_sent, resume) events}) pauses after
    the first 2 MiB."""
    files, drop, gate = {}, set(), {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path not in files:
                self.send_error(404)
                return
            body = files[self.path]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body) + (1000 if self.path in drop else 0)))
            self.end_headers()
            if self.path in gate:  # send the first 2 MiB, then wait until the test says go
                half_sent, resume = gate[self.path]
                self.wfile.write(body[:2 << 20])
                self.wfile.flush()
                half_sent.set()
                resume.wait(timeout=60)  # a limit only against a hung test
                body = body[2 << 20:]
            self.wfile.write(body)  # HTTP/1.0: the connection closes after this, short or not

        def log_message(self, *args):  # keep pytest output quiet
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    deadline = threading.Timer(60, httpd.shutdown)  # stops by itself even if the test hangs
    deadline.daemon = True
    deadline.start()
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{httpd.server_address[1]}",
                              files=files, drop=drop, gate=gate)
    finally:
        deadline.cancel()
        for _, resume in gate.values():  # never leave a handler waiting
            resume.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)




def test_download_file_is_atomic_when_connection_drops(tmp_path, server):
    server.files["/big.bin"] = b"x" * 10
    server.drop.add("/big.bin")  # claims 1010 bytes, sends 10, hangs up
    dest = tmp_path / "out" / "big.bin"
    with pytest.raises(ConnectionError):
        download.download_file(server.url + "/big.bin", dest, desc="big.bin")
    leftovers = list(dest.parent.iterdir())
    assert leftovers == [], f"minbert.tools.download.download_file: a dropped download left {leftovers}"


def test_download_file_never_shows_a_partial_file_under_the_final_name(tmp_path, server, monkeypatch):
    """While the body is still arriving, only the .part file exists; then it is renamed. The server holds
    the last MiB until the test has looked; the client reports its first MiB written through its progress
    bar (patched to signal), so the look happens mid-download on any machine, however busy."""
    body = bytes(range(256)) * (12 << 10)  # 3 MiB: the server pauses after 2 MiB
    server.files["/slow.bin"] = body
    half_sent, resume, first_chunk = threading.Event(), threading.Event(), threading.Event()
    server.gate["/slow.bin"] = (half_sent, resume)

    class SignallingBar(download.tqdm):
        def update(self, n=1):
            super().update(n)
            first_chunk.set()   # a chunk has been written to the file download_file opened

    monkeypatch.setattr(download, "tqdm", SignallingBar)
    dest = tmp_path / "slow.bin"
    part = tmp_path / "slow.bin.part"
    result = {}

    def fetch():
        result.update(path=download.download_file(server.url + "/slow.bin", dest, "slow"))

    worker = threading.Thread(target=fetch, daemon=True)
    worker.start()
    try:   # the waits' limits only keep a broken download_file from hanging the suite
        assert first_chunk.wait(timeout=60), "minbert.tools.download.download_file: no chunk was written within 60 s"
        assert part.exists() and not dest.exists(), \
            f"minbert.tools.download.download_file: mid-download expected only {part.name}, found {_names(tmp_path)}"
    finally:
        resume.set()
        worker.join(timeout=60)
    assert result.get("path") == dest and dest.read_bytes() == body and not part.exists(), \
        f"minbert.tools.download.download_file: after the download expected only {dest.name}, found {_names(tmp_path)}"


def test_download_file_writes_the_whole_file(tmp_path, server):
    server.files["/small.bin"] = bytes(range(256)) * 4
    dest = download.download_file(server.url + "/small.bin", tmp_path / "small.bin", desc="small.bin")
    assert dest == tmp_path / "small.bin" and dest.read_bytes() == bytes(range(256)) * 4, \
        "minbert.tools.download.download_file: downloaded bytes differ from the served bytes"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".part"] == [], \
        "minbert.tools.download.download_file: a .part file was left"
