"""Lines of the package and the two training scripts stay within pyproject.toml's line length (characters, as an
editor counts them), so the code reads in one window without wrapping."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_no_line_of_the_package_or_the_scripts_is_longer_than_the_configured_limit():
    limit = int(re.search(r"^line-length = (\d+)", (ROOT / "pyproject.toml").read_text(), re.M).group(1))
    files = sorted((ROOT / "minbert").rglob("*.py")) + [ROOT / "train_multitask.py", ROOT / "train_mml.py"]
    long = [f"{path.relative_to(ROOT)}:{n}: {len(line)} characters"
            for path in files for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if len(line) > limit]
    assert not long, f"{len(long)} line(s) over {limit} characters; wrap them (pyproject.toml [tool.ruff]):\n" + \
        "\n".join(long)
