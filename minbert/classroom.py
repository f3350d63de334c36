"""The classroom edition: solution markers, a student copy in one command, the tests as a grader.

One source of truth, as in nbgrader (Jupyter's grading tool): the solution code carries the
assignments, each graded body wrapped in comment markers, with the hint ABOVE the block so it
survives stripping:

        # Hint: what to write, in words (kept in the student copy)
        ### BEGIN SOLUTION embeddings
        ...the reference lines...
        ### END SOLUTION

    python -m minbert.classroom student OUT [--assignments embeddings,adamw]
        copies the repository's tracked files to OUT and replaces each selected block with a stub
        raising NotImplementedError("assignment N (key): write <qualified name> ..."). Blocks of
        assignments not selected lose only their two marker lines. Left out of the copy: git
        history, caches, benchmark results (bench/results), helper notes, this module's own test
        (tests/test_classroom.py, which needs the solution) and tests/test_pcgrad_per_param.py (its
        float64 reference re-derives Algorithm 1 line by line: assignment 8's solution). README.md gets an "Assignments" section.
    python -m minbert.classroom grade [DIR] [--json results.json]
        runs the grader tests of THIS repository (the instructor's tests and tests/fixtures) against
        DIR's minbert/ package in a scratch folder, so editing the tests in DIR changes nothing.
        Points come from individual test functions (a parametrized one scores when all its cases
        pass): partial credit. Prints assignment -> points / max with the first failing check's
        message; --json writes Gradescope's autograder format. Exits 0 whatever the score; 1 only
        when grading itself breaks (pytest did not run).

The stub raises the builtin NotImplementedError, so pytest shows it as usual; the training scripts'
`minbert.errors.cli` prints a stub's message as one line without a traceback (see errors.py).
The registry below is the rubric: course order, the functions to write, tests and points.
"""

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError, cli

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Assignment:
    key: str            # the word after "### BEGIN SOLUTION"
    title: str
    functions: list     # qualified names the student writes
    tests: dict         # "tests/file.py::test_function" -> points
    note: str = ""      # what is given code or optional


ASSIGNMENTS = [
    Assignment("embeddings", "Embeddings: word + position + token type, LayerNorm, dropout",
               ["minbert.layers.Embeddings.forward"],
               {"tests/test_layers.py::test_embeddings_output_shape_is_B_T_C": 2,
                "tests/test_layers.py::test_embeddings_match_stored_reference_without_token_types": 3,
                "tests/test_layers.py::test_embeddings_match_stored_reference_with_token_types": 3,
                "tests/test_layers.py::test_embeddings_dropout_only_in_training": 2}),
    Assignment("attention", "Multi-head self-attention, the explicit path",
               ["minbert.attention.SelfAttention.forward"],
               {"tests/test_attention.py::test_attention_output_shape_is_B_T_C": 2,
                "tests/test_attention.py::test_explicit_attention_matches_einsum_reference": 4,
                "tests/test_attention.py::test_attention_ignores_padded_keys": 2,
                "tests/test_attention.py::test_attention_dropout_only_in_training": 2},
               "given: the fast path (F.scaled_dot_product_attention, BertConfig.fast_attention=True)"),
    Assignment("layer", "The transformer layer (add & norm, feed-forward) and BertModel's forward",
               ["minbert.layers.BertLayer.forward", "minbert.model.BertModel.encode"],
               {"tests/test_layers.py::test_bert_layer_matches_stored_reference": 4,
                "tests/test_layers.py::test_bert_layer_adds_extra_before_the_second_layer_norm": 2,
                "tests/test_model.py::test_encode_matches_stored_reference": 4}),
    Assignment("adamw", "AdamW's step and the warmup/decay schedule",
               ["minbert.adamw.AdamW.step", "minbert.adamw.linear_warmup_decay"],
               {"tests/test_adamw.py::test_first_step_moves_each_coordinate_by_lr_times_sign": 1,
                "tests/test_adamw.py::test_zero_gradient_step_is_exactly_lr_scaled_decay": 1,
                "tests/test_adamw.py::test_decoupled_decay_is_not_l2_and_matches_torch": 2,
                "tests/test_adamw.py::test_adamw_matches_torch_adamw_trajectory": 4,
                "tests/test_adamw.py::test_linear_warmup_decay_matches_formula": 2},
               "given: the state bookkeeping in step (a plain per-tensor loop is as good as _foreach_)"),
    Assignment("multitask", "The multitask heads and losses",
               ["minbert.multitask.make_head", "minbert.multitask.MultitaskBert.pooled",
                "minbert.multitask.MultitaskBert.head", "minbert.multitask.task_loss"],
               {"tests/test_multitask.py::test_heads_have_the_documented_layers": 2,
                "tests/test_multitask.py::test_head_output_shapes_per_task": 2,
                "tests/test_multitask.py::test_task_losses_match_hand_computation": 4,
                "tests/test_multitask.py::test_mean_pooling_ignores_padding": 2}),
    Assignment("pals", "PALs: projected attention layers",
               ["minbert.pals.PALs.forward"],
               {"tests/test_pals.py::test_pal_term_matches_written_out_TS": 6,
                "tests/test_pals.py::test_pal_term_is_zero_when_V_D_is_zero": 2,
                "tests/test_pals.py::test_pal_term_ignores_padded_keys": 2},
               "the grader runs PALs with fast_attention=True, so it does not need assignment 2"),
    Assignment("smart", "SMART: divergence, ascent + projection, Bregman teacher",
               ["minbert.smart.divergence", "minbert.smart.SMART.perturb", "minbert.smart.SMART.update_teacher"],
               {"tests/test_smart.py::test_divergence_matches_numpy_symmetric_kl": 3,
                "tests/test_smart.py::test_divergence_is_symmetric_nonnegative_and_zero_on_equal_inputs": 1,
                "tests/test_smart.py::test_one_output_divergences_are_nonzero_where_one_logit_softmax_is_zero": 2,
                "tests/test_smart.py::test_ascent_normalises_per_example_and_projects_onto_the_ball": 4,
                "tests/test_smart.py::test_ascent_step_follows_the_divergence_gradient": 2,
                "tests/test_smart.py::test_teacher_update_is_the_beta_weighted_average": 3},
               "given: mode='reference' (mt-dnn's perturbation), adversarial_loss, bregman_loss"),
    Assignment("surgery", "PCGrad and GradVac (the surgery on the Gram matrix)",
               ["minbert.pcgrad.pcgrad_coefficients", "minbert.gradvac.gradvac_coefficients"],
               {"tests/test_surgery_coefficients.py::test_pcgrad_two_tasks_remove_the_conflicting_component": 3,
                "tests/test_surgery_coefficients.py::test_pcgrad_three_tasks_match_algorithm_1_on_vectors": 3,
                "tests/test_surgery_coefficients.py::test_pcgrad_leaves_non_conflicting_gradients_alone": 1,
                "tests/test_surgery_coefficients.py::test_gradvac_with_zero_targets_is_pcgrad": 2,
                "tests/test_surgery_coefficients.py::test_gradvac_adjusted_cosine_equals_the_target": 3,
                "tests/test_surgery_coefficients.py::test_gradvac_targets_follow_the_ema_of_the_cosine": 2,
                "tests/test_surgery_coefficients.py::test_gradvac_leaves_pairs_at_or_above_target_alone": 1},
               "given: the PCGrad/GradVac classes (one Gram matrix per step, the fast path)"),
    Assignment("meanshift", "MeanShift clustering (1-D, flat kernel) and its bandwidth",
               ["minbert.meanshift.estimate_bandwidth", "minbert.meanshift.mean_shift"],
               {"tests/test_meanshift.py::test_six_points_three_clusters": 2,
                "tests/test_meanshift.py::test_nine_points_centres_ordered_by_population": 2,
                "tests/test_meanshift.py::test_equal_populations_order_larger_centre_first": 1,
                "tests/test_meanshift.py::test_estimate_bandwidth_fixed_values": 2,
                "tests/test_meanshift.py::test_huge_bandwidth_gives_one_cluster_at_the_mean": 1,
                "tests/test_meanshift.py::test_centres_are_fixed_points_of_the_shift": 2},
               "given: bandwidth 0 (one cluster per unique value)"),
    Assignment("mml", "MML: multiverse loss, head elimination, Eq. 5 inference",
               ["minbert.mml.MultiverseHeads.multiverse_loss", "minbert.mml.MultiverseHeads.predict",
                "minbert.mml.HeadEliminator.observe", "minbert.mml.HeadEliminator.maybe_eliminate"],
               {"tests/test_mml.py::test_multiverse_loss_matches_brute_force_loop": 2,
                "tests/test_mml.py::test_multiverse_loss_excludes_inactive_heads": 1,
                "tests/test_mml.py::test_multiverse_loss_is_zero_for_orthonormal_heads": 1,
                "tests/test_mml.py::test_observe_updates_active_heads_with_momentum": 2,
                "tests/test_mml.py::test_elimination_keeps_the_lowest_cluster_whatever_the_clustering": 2,
                "tests/test_mml.py::test_predict_uses_only_active_heads": 2},
               "the elimination grader fakes MeanShift, so it does not need assignment 9"),
]
BY_KEY = {a.key: a for a in ASSIGNMENTS}

# ---------------------------------------------------------------------- the stripper

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
# The stub's template. This line names the markers on purpose: it is the generator of the stubs, not a
# stub, and the repository's no-stub check accepts lines that mention the markers they replace.
STUB = '{indent}raise NotImplementedError("assignment {number} ({key}): write {where} ({path}:{line}); see the hint above")\n'  # replaces ### BEGIN SOLUTION ... ### END SOLUTION


def functions_by_line(text: str, module: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function and method in a module's source
    (a function nested in another counts as the outer one: that is what the student opens)."""
    spans = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                spans.append((child.lineno, child.end_lineno, prefix + child.name))   # not its inner defs
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)
    visit(ast.parse(text), module + ".")
    return spans


def strip(text: str, path: str, selected: set) -> tuple[str, list[str]]:
    """Student version of one file: selected blocks -> stub, other blocks -> their code.
    Returns (new text, the removed solution lines)."""
    spans = functions_by_line(text, path.removesuffix(".py").replace("/", ".")) if path.endswith(".py") else []
    out, removed, block = [], [], None
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        s = line.strip()
        if s.startswith(BEGIN):
            if block is not None or s[len(BEGIN):].strip() not in BY_KEY:
                raise UserError(f"{path}:{n}: expected '{BEGIN} <assignment>' with one of {list(BY_KEY)}, "
                                "outside any other block")
            block = s[len(BEGIN):].strip()
            if block in selected:
                where = max((sp for sp in spans if sp[0] <= n <= sp[1]), default=(0, 0, path))[2]
                indent = line[:len(line) - len(line.lstrip())]
                out += [f"{indent}# YOUR CODE HERE\n", STUB.format(
                    indent=indent, number=list(BY_KEY).index(block) + 1, key=block, where=where, path=path, line=len(out) + 2)]
        elif s.startswith(END):
            if block is None:
                raise UserError(f"{path}:{n}: '{END}' without a '{BEGIN}' above it")
            block = None
        elif block in selected:
            removed.append(line)
        else:
            out.append(line)
    if block is not None:
        raise UserError(f"{path}: a '{BEGIN} {block}' block is never closed by '{END}'")
    return "".join(out), removed


# ---------------------------------------------------------------------- the student copy

LEFT_OUT = re.compile(r"(^|/)(\.git|__pycache__|\.pytest_cache)(/|$)|\.pyc$|^bench/results/|^NOTES-[^/]*\.md$"
                      r"|^tests/test_classroom\.py$|^tests/test_pcgrad_per_param\.py$")


def tracked_files(root: Path) -> list[str]:
    """The repository's files: git's list when root is a checkout, else every file but caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, text=True).stdout
        files = [f for f in out.split("\0") if f and (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    return sorted(f for f in files if not LEFT_OUT.search(f))


def assignments_markdown(selected=None) -> str:
    """The README's "Assignments" section, in course order (the selected ones only)."""
    rows = [a for a in ASSIGNMENTS if selected is None or a.key in selected]
    lines = ["## Assignments", "",
             "Implement the functions below, in this order; in each, a stub raising NotImplementedError marks where.",
             "Grade yourself with `python -m minbert.classroom grade` (partial credit per test; needs only",
             "`pip install -r requirements.txt pytest`); `--assignments adamw` grades one. Each grader test",
             "checks one assignment on its own: a missing earlier piece never costs points on a later one.",
             "Given code, not assignments: the fast paths (attention through F.scaled_dot_product_attention",
             "with `BertConfig.fast_attention=True`, the CPU dropout of minbert/dropout.py, the one-Gram-matrix",
             "PCGrad/GradVac classes); the graders lean on them so that no assignment's grade depends on another's.", "",
             "| # | assignment (key) | implement | points | tests | notes |", "|---|---|---|---|---|---|"]
    for a in rows:
        files = sorted({t.split("::")[0] for t in a.tests})
        lines.append(f"| {ASSIGNMENTS.index(a) + 1} | {a.title} (`{a.key}`) | "
                     + "<br>".join(f"`{f}`" for f in a.functions)
                     + f" | {sum(a.tests.values())} | " + ", ".join(f"`{f}`" for f in files) + f" | {a.note} |")
    return "\n".join(lines) + "\n"


def with_assignments_section(readme: str, section: str) -> str:
    """Replace README's "## Assignments" section (up to the next "## ") or insert it before "## Tests"."""
    m = re.search(r"^## Assignments\n.*?(?=^## |\Z)", readme, flags=re.M | re.S)
    if m:
        return readme[:m.start()] + section + "\n" + readme[m.end():]
    m = re.search(r"^## Tests", readme, flags=re.M)
    at = m.start() if m else len(readme)
    return readme[:at] + section + "\n" + readme[at:]


def student(out: Path, selected: set, root: Path = ROOT) -> dict:
    """Write the student copy (selected: assignment keys, None = all); returns {path: removed lines}."""
    out, selected = Path(out), set(BY_KEY) if selected is None else selected
    if out.exists() and any(out.iterdir()):
        raise UserError(f"student: {out} exists and is not empty; pass a new folder")
    removed = {}
    for rel in tracked_files(root):
        src, dst = root / rel, out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".py") and rel != "minbert/classroom.py":   # the tool itself quotes the markers
            text = src.read_text(encoding="utf-8")
            if BEGIN in text:
                text, lines = strip(text, rel, selected)
                removed[rel] = lines
            dst.write_text(text, encoding="utf-8")
        elif rel == "README.md":
            dst.write_text(with_assignments_section(src.read_text(encoding="utf-8"), assignments_markdown(selected)))
        else:
            shutil.copyfile(src, dst)
    return removed


# ---------------------------------------------------------------------- grading

def run_tests(package: Path, tests: list[str]) -> dict[str, list[tuple[bool, str]]]:
    """Run test node ids of this repository against `package` (a minbert/ folder) in a scratch
    folder; returns {"tests/file.py::function": [(passed, first message line) per case]}."""
    with tempfile.TemporaryDirectory(prefix="minbert-grade-") as tmp:
        tmp = Path(tmp)
        shutil.copytree(package, tmp / "minbert", ignore=shutil.ignore_patterns("__pycache__"))
        for f in sorted({t.split("::")[0] for t in tests}):
            (tmp / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / f, tmp / f)
        shutil.copytree(ROOT / "tests" / "fixtures", tmp / "tests" / "fixtures", ignore=shutil.ignore_patterns("__pycache__"))
        (tmp / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "--continue-on-collection-errors",
                               "--junitxml", str(tmp / "results.xml"), *tests],
                              cwd=tmp, env=env, capture_output=True, text=True)
        if not (tmp / "results.xml").exists():
            raise RuntimeError(f"grade: pytest did not run (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
        root = ET.parse(tmp / "results.xml").getroot()
    results = {}
    for case in root.iter("testcase"):
        name, classname = case.get("name", "").split("[")[0], case.get("classname", "")
        # a module that failed to import is one case with no class name, named after the module
        node = (name.replace(".", "/") + ".py::<collection>") if not classname else classname.replace(".", "/") + ".py::" + name
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is None and case.find("skipped") is not None:
            bad = case.find("skipped")
        message = "" if bad is None else (bad.get("message") or bad.text or "failed").strip()
        results.setdefault(node, []).append((bad is None, first_line(message)))
    return results


def first_line(message: str) -> str:
    line = next((ln for ln in message.splitlines() if ln.strip()), "")
    return line.removeprefix("AssertionError: ").strip()[:400]


def grade(directory: Path, selected=None) -> list[dict]:
    """One Gradescope test entry per graded test function."""
    package = Path(directory) / "minbert"
    if not (package / "__init__.py").exists():
        raise UserError(f"grade: {directory} has no minbert/ package; pass the repository or a student copy")
    chosen = [a for a in ASSIGNMENTS if selected is None or a.key in selected]
    results = run_tests(package, [t for a in chosen for t in a.tests])
    entries = []
    for a in chosen:
        for test, points in a.tests.items():
            file = test.split("::")[0]
            cases = results.get(test) or results.get(f"{file}::<collection>") or [(False, "test was not collected")]
            failures = [msg for ok, msg in cases if not ok]
            entries.append({"name": f"{ASSIGNMENTS.index(a) + 1}. {a.key}: {test}", "assignment": a.key,
                            "score": 0 if failures else points, "max_score": points,
                            "output": failures[0] if failures else "passed"})
    return entries


def table(entries: list[dict]) -> str:
    lines, total, maximum = [f"{'assignment':<14} {'points':>8}  first failing check"], 0, 0
    for a in ASSIGNMENTS:
        mine = [e for e in entries if e["assignment"] == a.key]
        if not mine:
            continue
        got, most = sum(e["score"] for e in mine), sum(e["max_score"] for e in mine)
        total, maximum = total + got, maximum + most
        failing = next((e["output"] for e in mine if e["score"] < e["max_score"]), "")
        lines.append(f"{ASSIGNMENTS.index(a) + 1:>2}. {a.key:<10} {got:>3} / {most:<3}  {failing}")
    lines.append(f"{'total':<14} {total:>3} / {maximum}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m minbert.classroom", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("student", help="write a student copy with the solutions removed")
    s.add_argument("out", type=Path, help="a new (or empty) folder for the copy; hand it to students as is")
    s.add_argument("--assignments", default=",".join(BY_KEY),
                   help=f"comma-separated keys to remove, in any order (default all): {','.join(BY_KEY)}")
    g = sub.add_parser("grade", help="grade a repository or student copy; prints a table")
    g.add_argument("dir", nargs="?", type=Path, default=ROOT, help="folder holding minbert/ (default: this repository)")
    g.add_argument("--json", type=Path, default=None, help="also write Gradescope's results.json here")
    g.add_argument("--assignments", default=None, help="grade only these comma-separated keys (default all)")
    args = p.parse_args(argv)
    keys = None if args.assignments is None else {k.strip() for k in args.assignments.split(",") if k.strip()}
    unknown = sorted((keys or set()) - set(BY_KEY))
    if unknown:
        raise UserError(f"--assignments: unknown {unknown}; choose from {','.join(BY_KEY)}")
    if args.command == "student":
        removed = student(args.out, keys)
        print(f"wrote {args.out}: {sum(map(len, removed.values()))} solution lines removed from "
              f"{sum(1 for v in removed.values() if v)} files; grade it with: python -m minbert.classroom grade {args.out}")
        return
    try:
        entries = grade(args.dir, keys)
    except RuntimeError as e:   # grading itself broke: say so, exit 1 (a low score exits 0)
        print(e, file=sys.stderr)
        sys.exit(1)
    print(table(entries))
    if args.json:
        report = {"score": sum(e["score"] for e in entries),
                  "tests": [{k: e[k] for k in ("name", "score", "max_score", "output")} for e in entries]}
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    cli(main)
