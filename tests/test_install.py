"""`pip install -e .`, the README's install line, then `import minbert` from any folder: the clone's parent too,
where the clone itself (a folder named minbert, with no __init__.py) is a namespace package Python finds first.

Oracle: (c) a property, with Python's own import system and setuptools' own build: the editable wheel that
setuptools builds from pyproject.toml (PEP 660's build_editable, offline, what pip calls) is laid into a new site
folder as pip lays it out, and a fresh interpreter started in the clone's parent imports minbert from
minbert/__init__.py, with load_run. No virtual environment and nothing downloaded.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IMPORT = "import site, sys; site.addsitedir(sys.argv[1]); import minbert; print(minbert.__file__, hasattr(minbert, " \
         "'load_run'))"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the clone's parent, the clone, a site folder holding what `pip install -e .` puts in site-packages)."""
    parent = tmp_path_factory.mktemp("parent")
    clone = parent / "minbert"   # `git clone ... minbert`: the folder has the package's name
    shutil.copytree(ROOT / "minbert", clone / "minbert", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        shutil.copyfile(ROOT / name, clone / name)
    wheels = parent / "wheels"
    build = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
                            "print(build_meta.build_editable(sys.argv[1]))", str(wheels)],
                           cwd=clone, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"setuptools could not build the editable wheel:\n{build.stderr[-2000:]}"
    site = parent / "site-packages"
    with zipfile.ZipFile(wheels / build.stdout.splitlines()[-1]) as wheel:   # the .pth (and any hook) pip installs
        wheel.extractall(site, [n for n in wheel.namelist() if "/" not in n])
    return parent, clone, site


@pytest.mark.parametrize("where", ["the clone's parent", "another folder"])
def test_import_minbert_finds_the_package_from_any_folder(installed, where):
    parent, clone, site = installed
    folder = parent if where == "the clone's parent" else parent / "elsewhere"
    folder.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    # -S: no site-packages but the new site folder (minbert is not installed in the tests' own environment)
    p = subprocess.run([sys.executable, "-S", "-c", IMPORT, str(site)], cwd=folder, env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.split() == [str(clone / "minbert" / "__init__.py"), "True"], \
        f"pyproject.toml: after `pip install -e .`, `import minbert` from {where} found {p.stdout.strip()!r} " \
        f"(None: the clone folder as a namespace package, with no load_run){p.stderr[-1500:]}"
