"""Every committed study table rebuilt from its committed records, and compared with the committed file byte for byte.

- bench/results/study, study_controls, study_confirmation (once its runs are in): `python bench/study.py
  --tables_only` with the folder's own configurations, seeds, budget and selection rule (its table.json header), on a
  temporary copy of the folder: table.md, table.json.
- bench/results/mml_study: `python bench/mml_study.py --tables_only` with the command of its README: table1.md/.json,
  cross_dataset.md/.json. RTE's models were also scored on QNLI dev; the study asks only whether a QNLI dev file
  exists to know that column is in the records, so the rebuild hands it an empty one (no QNLI example is read).
- stsb_rerun.md (bench/mml_stsb_rerun.py), study_controls/confirmation.md and study_confirmation/confirmation.md
  (bench/study_confirmation.py).
The plots (study.png, performance_profile.png) are not compared: their bytes depend on the matplotlib version.
tests/studies/test_committed_tables.py runs the comparison.

    python bench/rebuild_tables.py           # compare: a diff and exit status 1 where a table differs
    python bench/rebuild_tables.py --write   # rewrite them (after a change to how a table is written)
"""

import contextlib
import difflib
import io
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # run from anywhere
sys.path.insert(0, HERE)
RESULTS = os.path.join(HERE, "results")
STUDIES = ("study", "study_controls", "study_confirmation")
MML_COMMAND = ["--tasks", "RTE,MRPC,STS-B,CoLA,STS-B*", "--model", "minilm-l6", "--seeds", "1,2,3", "--epochs", "3",
               "--eliminate_every", "50", "--min_bandwidth", "0.001"]


def study_tables(name: str, tmp: str) -> dict[str, str]:
    from bench import study
    folder = os.path.join(RESULTS, name)
    with open(os.path.join(folder, "table.json")) as f:
        header = json.load(f)
    copy = os.path.join(tmp, name)
    shutil.copytree(folder, copy)
    fewer = header.get("fewer_seeds", {})
    argv = ["--tables_only", "--in_process", "--select_epoch", header.get("select_epoch", "best"),
            "--configs", ",".join(header["configs"]), "--seeds", ",".join(map(str, header["seeds"])),
            "--examples_per_epoch", str(header["examples_per_epoch"]),
            *(["--seeds_per_config", ",".join(f"{c}={n}" for c, n in fewer.items())] if fewer else []),
            "--out_dir", os.path.join(tmp, name + "-runs"), "--results_dir", copy, "--", *header["budget"]]
    with contextlib.redirect_stdout(io.StringIO()):
        if study.main(argv) is None:
            raise SystemExit(f"bench/results/{name}: a run of its table has no committed record")
    return {f"{name}/{n}": open(os.path.join(copy, n)).read() for n in ("table.md", "table.json")}


def mml_tables(tmp: str) -> dict[str, str]:
    from minbert.tasks.glue import TASKS
    from bench import mml_study
    glue = os.path.join(tmp, "glue")
    shipped = os.path.join(HERE, "..", "data", "glue_data")
    os.makedirs(glue)
    for task in os.listdir(shipped):
        os.symlink(os.path.abspath(os.path.join(shipped, task)), os.path.join(glue, task))
    qnli = TASKS["QNLI"]
    os.makedirs(os.path.join(glue, qnli.folder), exist_ok=True)
    open(os.path.join(glue, qnli.folder, qnli.splits["dev"]), "w").close()
    copy = os.path.join(tmp, "mml_study")
    shutil.copytree(os.path.join(RESULTS, "mml_study"), copy)
    with contextlib.redirect_stdout(io.StringIO()):
        mml_study.main([*MML_COMMAND, "--tables_only", "--glue_dir", glue, "--out_dir", os.path.join(tmp, "mml-runs"),
                        "--results_dir", copy])
    return {f"mml_study/{n}": open(os.path.join(copy, n)).read()
            for n in ("table1.md", "table1.json", "cross_dataset.md", "cross_dataset.json")}


def pages() -> dict[str, str]:
    import mml_stsb_rerun
    import study_confirmation
    out = {"mml_study/stsb_rerun.md": mml_stsb_rerun.main(write=False),
           "study_controls/confirmation.md": study_confirmation.first_confirmation(write=False)}
    if os.path.isfile(os.path.join(RESULTS, "study_confirmation", "table.json")):
        out["study_confirmation/confirmation.md"] = study_confirmation.second_confirmation(write=False)
    return out


def rebuilt() -> dict[str, str]:
    """{path under bench/results: the text rebuilt from the records}; tables first, then the pages that read them."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in STUDIES:
            if os.path.isfile(os.path.join(RESULTS, name, "table.json")):
                out.update(study_tables(name, tmp))
        out.update(mml_tables(tmp))
    return out


def main(argv=None) -> int:
    write = "--write" in (sys.argv[1:] if argv is None else argv)
    texts, differ = rebuilt(), []
    if write:   # the tables first: the confirmation pages read them
        for rel, text in texts.items():
            with open(os.path.join(RESULTS, rel), "w") as f:
                f.write(text)
    texts.update(pages())
    for rel, text in texts.items():
        path = os.path.join(RESULTS, rel)
        if write:
            with open(path, "w") as f:
                f.write(text)
        committed = open(path).read()
        if committed != text:
            differ.append(rel)
            sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), text.splitlines(True),
                                                       f"committed {rel}", f"rebuilt {rel}", n=1))
    print(("rewrote " if write else "same, byte for byte: " if not differ else "DIFFER: ")
          + ", ".join(differ or texts))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
