"""Grades the words of the committed studies against their numbers: every verdict word of docs/studies.md, the
results READMEs and the committed tables must follow the page's own rule (docs/studies.md, "Reading a table").

One test per rule, each reading the committed files (no training, nothing outside the repository):
  1. a table's verdict word matches its Holm-adjusted p (noise iff p ≥ 0.05) and the sign of its Δ;
  2. the docs' verdict words ("lower", "higher", "noise") match the Holm p quoted beside them;
  3. a verdict that only seeds 4-5 resolved is labelled exploratory, and one the fresh seeds did not confirm says so;
  4. "noise" is never read as "no effect" or as a cause (phrases that did so are listed);
  5. the summary table of verdicts lists exactly the configurations the study's table gives each verdict;
  6. a fresh-seed result of a confirmation claim is quoted with that family's Holm p only;
  7. a paper figure names its table, rows and column, and equals what those cells give (the MML paper's and the
     CS224N reports'), and every paper cell of the main table quotes one or says there is no figure;
  8. the power and sign-flip figures of the committed tables agree with scipy on the committed per-seed records;
  9. the underclaim direction: where a paper's effect lies outside our interval for the same comparison, the page
     says so (and says "inside" only where it is inside);
 10. every per-task verdict of the study's table is on the page with its exploratory label;
 11. a record a page cites (a path under bench/results/) is committed;
 12. the words follow the numbers: the section is named for what it does (no "What replicates at small scale") and
     every link into docs/studies.md resolves; "not confirmed" states its power and never reads as "absent"; the
     first confirmation's power at 0.05 is an upper bound; the 3-seed power factors name the families there are;
     MML's words follow Table 1 and its Average gaps; every hold-out lead is listed; Pritsky's Dev. Mean is compared
     on its own scale; the study command says which epoch it scores; docs/benchmarks.md describes the confirmation
     script; the plan's erratum counts what its commands and the power code give; the running confirmation points
     to its amendment and log;
 13. the second confirmation's sentences follow their numbers: a 3-decimal interval rounds each end once; the planned
     power is the plan's (unrounded δ, σ); the surgery verdict states its scope and the distribution-free floor; no seed
     count without its power calculation; no "recipe with itself" where the budgets differ; "no result was read"
     names the results the log records; the seed-22 record's clock; every start of commands.txt in the log and its
     once-only lines said; no editing notes; the dropped claim's detectable |Δ|; the CPU model only as the records
     name it; "at most" on the first confirmation's page; PCGrad and GradVac not "one method" where they differ; a
     paper's reported gain with its cells; the controls' run times as the records give them.
Oracles: scipy.stats.ttest_rel, scipy.stats.nct, scipy.stats.permutation_test; the papers' cells (Malkiel & Wolf
2021, Tables 1-3; Pritsky, Somerville & Huynh, Table 2; Benton, Figure 3; Song, Hu & Pan, Table 2) written out below
from the papers' text.

Run: python -m pytest -q tests/studies/test_study_claims.py   (offline, seconds)
"""

import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import scipy  # scipy.stats loads at its first use, not while pytest collects (seconds on a busy CPU)
from test_study_power import scipy_power   # the power oracle, shared

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
DOCS = REPO / "docs" / "studies.md"
TABLES = [RESULTS / "study" / "table.md", RESULTS / "study_controls" / "table.md",
          RESULTS / "mml_study" / "table1.md", RESULTS / "mml_study" / "cross_dataset.md",
          RESULTS / "mml_study" / "stsb_rerun.md"]
PAGES = [DOCS, *sorted(RESULTS.glob("**/README.md"))]
# display names of the multitask configurations in docs/studies.md
NAMES = {"PALs": "pals", "SMART": "smart", "R3F": "r3f", "PCGrad": "pcgrad", "GradVac": "gradvac",
         "Gradient Compromise": "grad_compromise", "its normalized reading": "grad_compromise_normalize",
         "annealed sampling": "annealed", "cosine + MNR": "mnr", "concat head": "concat", "SimCSE": "simcse",
         "head pretraining": "head_pretraining", "PALs after fine-tuning": "pals_after"}
HOLM_CELL = re.compile(r"(\d\.\d{3}) (higher|lower|noise) \(p (\d\.\d{4}); sign-flip p (\d\.\d{4})\)")


def number(text: str) -> float:
    return float(text.replace("−", "-"))


def markdown_tables(text: str) -> list[list[dict]]:
    """Every markdown table of a page as a list of {header: cell} rows."""
    tables, block = [], []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            header, rows = block[0], [r for r in block[1:] if not set("".join(r)) <= set("-: ")]
            tables.append([dict(zip(header, r)) for r in rows])
            block = []
    return tables


def holm(p: list[float]) -> list[float]:
    """Holm (1979) step-down adjusted p, written here from the definition."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def seeds_of(path: Path) -> int:
    m = re.search(r"seeds \[([\d, ]+)\]", path.read_text())
    return len(m.group(1).split(",")) if m else 3


# ---------------------------------------------------------------------------------------------- rule 1


@pytest.mark.parametrize("path", TABLES, ids=lambda p: str(p.relative_to(RESULTS)))
def test_table_verdict_words_match_their_holm_p_and_the_sign_of_their_difference(path):
    text = path.read_text()
    n = seeds_of(path)
    tables = markdown_tables(text)
    cells = 0
    for t, table in enumerate(tables):
        for row in table:
            name = next(iter(row.values()))
            for column, cell in row.items():
                m = HOLM_CELL.fullmatch(cell)
                if not m:
                    continue
                cells += 1
                p_holm, verdict, p, flip = float(m[1]), m[2], float(m[3]), float(m[4])
                where = f"{path.relative_to(REPO)}: {name}, {column}: '{cell}'"
                assert (verdict == "noise") == (p_holm >= 0.05), f"{where}: the verdict must be 'noise' exactly when Holm p ≥ 0.05"
                assert p_holm >= p - 5e-4, f"{where}: a Holm-adjusted p is never below its unadjusted p"
                assert flip >= 2 / 2 ** n - 5e-5, f"{where}: a sign-flip p below its floor 2/2^{n}"
                if verdict != "noise":   # the sign: the Δ table with the same row and column, earlier on the page
                    key = column.replace("Holm p, ", "")
                    deltas = [r for tb in tables[:t + 1] for r in tb if next(iter(r.values())) == name]
                    if key == "Holm p":   # a table with one Δ column beside its Holm column
                        key = next(c for r in deltas for c in r if c.startswith("Δ"))
                    delta = next(r[c] for r in reversed(deltas) for c in r if c.split(" vs ")[0] == key.split(" vs ")[0]
                                 and re.match(r"[+\-−]\d", r[c]))
                    assert (verdict == "higher") == (number(delta.split()[0]) > 0), f"{where}: Δ is {delta}"
    assert cells, f"{path.relative_to(REPO)}: no Holm cell found ('0.046 higher (p 0.0046; sign-flip p 0.0625)')"


# ---------------------------------------------------------------------------------------------- rule 2

PROSE_VERDICT = re.compile(r"Holm p (\d\.\d+)\s*\((lower|higher|noise)")


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_verdict_words_follow_the_holm_p_beside_them(path):
    text = path.read_text()
    for m in PROSE_VERDICT.finditer(" ".join(text.split())):   # a quote may break across lines
        assert (m[2] == "noise") == (float(m[1]) >= 0.05), \
            f"{path.relative_to(REPO)}: '{m[0]}': the verdict beside a Holm p must be 'noise' exactly when p ≥ 0.05"
    for table in markdown_tables(text):
        for row in table:
            p_col = next((c for c in row if c == "Holm p"), None)
            v_col = next((c for c in row if c.startswith("verdict")), None)
            if not p_col or not v_col or not re.fullmatch(r"\d\.\d+", row[p_col]):
                continue
            p, verdict = float(row[p_col]), row[v_col].replace("*", "")
            where = f"{path.relative_to(REPO)}: row '{next(iter(row.values()))}': Holm p {p}, verdict '{row[v_col]}'"
            assert not re.match(r"(helps|hurts)\b",
                                verdict), f"{where}: the page's verdict words are higher / lower / noise"
            if verdict.startswith(("lower", "higher")):
                assert p < 0.05, f"{where}: 'lower' or 'higher' needs Holm p < 0.05"
            elif verdict.startswith("noise"):
                assert p >= 0.05, f"{where}: 'noise' needs Holm p ≥ 0.05"
            elif "not confirmed" not in verdict:
                pytest.fail(f"{where}: a verdict starts with higher, lower or noise (or says 'not confirmed')")


# ---------------------------------------------------------------------------------------------- rule 3


def test_exploratory_verdicts_are_labelled_and_unconfirmed_ones_say_so():
    """Seeds 4-5 were added after the 3-seed table was read: a dev-overall verdict that is 'noise' on seeds 1-3 alone
    (paired t, Holm over the configurations) and not on 1-5 is exploratory; confirmation.md's 'not confirmed' claims
    may not be called higher without 'not confirmed'."""
    configs = json.loads((RESULTS / "study" / "table.json").read_text())["configurations"]
    names = [n for n in configs if n not in ("baseline", "ensemble")]
    base = configs["baseline"]["scores"]["overall"]["values"]
    p3 = holm([scipy.stats.ttest_rel(configs[n]["scores"]["overall"]["values"][:3], base[:3]).pvalue for n in names])
    p5 = holm([scipy.stats.ttest_rel(configs[n]["scores"]["overall"]["values"], base).pvalue for n in names])
    exploratory = {n for n, a, b in zip(names, p3, p5) if a >= 0.05 > b}
    assert exploratory, "the committed study has verdicts that only seeds 4-5 resolved; none found: check the records"
    main = next(t for t in markdown_tables(DOCS.read_text()) if t and "what the paper reported (dev overall)" in t[0])
    display = {v: k for k, v in NAMES.items()}
    for name in exploratory:
        row = next(r for r in main
                   if r["configuration"].startswith(display[name].replace("its normalized reading", "~")))
        assert "exploratory" in row["verdict here"], \
            f"docs/studies.md, main table, {display[name]}: Holm p {p3[names.index(name)]:.3f} on seeds 1-3 alone, " \
            f"{p5[names.index(name)]:.3f} on 1-5: a verdict only seeds 4-5 resolved must say 'exploratory'"
    unconfirmed = re.findall(r"\| (\w+) − baseline, \w+ \|.*\| not confirmed \|",
                             (RESULTS / "study_controls" / "confirmation.md").read_text())
    assert unconfirmed, "bench/results/study_controls/confirmation.md: no 'not confirmed' row parsed"
    for path in PAGES:
        for table in markdown_tables(path.read_text()):
            for row in table:
                text = " ".join(row.values())
                for name in set(unconfirmed):
                    if display[name] in text and re.search(r"\*?\*?higher", text):
                        assert "not confirmed" in text, \
                            f"{path.relative_to(REPO)}: row '{text[:80]}…' calls {display[name]} higher without 'not confirmed'"
    for path in PAGES:
        text = " ".join(path.read_text().split())
        for m in re.finditer(r"\bhelps\b", text):
            before = text[max(0, m.start() - 30): m.start()]
            assert "no evidence that it" in before, f"{path.relative_to(REPO)}: '…{before}helps': 'helps' is not a verdict of the page's rule"


# ---------------------------------------------------------------------------------------------- rule 4

NOISE_AS_NO_EFFECT = [r"does not (hurt|help)\b", r"\bequals? BERT\b", r"\bno effect\b(?!\")",
                      r"\bis the (update count|cosine head's)\b", r"\bthe collapse was the\b",
                      r"\bwas the head initiali[sz]ation",
                      r"measured as Song", r"\(no\)", r"none of them moves", r"as well as one head"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_noise_is_never_read_as_no_effect_or_as_a_cause(path):
    text = " ".join(path.read_text().split())
    for pattern in NOISE_AS_NO_EFFECT:
        m = re.search(pattern, text)
        assert m is None, (f"{path.relative_to(REPO)}: "
                           f"'…{text[max(0, m.start() - 60): m.end() + 40]}…': a noise result is "
                           "'not resolved' (give the interval), never 'no effect', equality or a cause")


# ---------------------------------------------------------------------------------------------- rule 5


def test_the_summary_of_verdicts_lists_what_the_table_gives():
    configs = json.loads((RESULTS / "study" / "table.json").read_text())["configurations"]
    want = {n: ("noise" if d["difference"]["overall"]["p_holm"] >= 0.05 else
                "higher" if d["difference"]["overall"]["mean"] > 0 else "lower")
            for n, d in configs.items() if d["difference"].get("overall", {}).get("p_holm") is not None}
    summary = next(t for t in markdown_tables(DOCS.read_text()) if t and set(t[0]) == {"verdict", "configurations"})
    got = {}
    for row in summary:
        verdict = row["verdict"].replace("*", "").split(",")[0].split(" (")[0].strip()
        for item in re.split(r", (?![^()]*\))", row["configurations"]):
            shown = re.sub(r" \(.*", "", item).strip()
            if shown.startswith("with "):   # "head pretraining (0.046), with an extra pass …": a remark, not a name
                continue
            assert shown in NAMES, f"docs/studies.md, verdict summary: unknown configuration '{shown}'"
            got[NAMES[shown]] = verdict
    assert got == want, ("docs/studies.md, 'Verdicts after Holm' table: it must list every configuration under the "
                         f"verdict of bench/results/study/table.json; differs at "
                         f"{ {n: (got.get(n), want.get(n)) for n in set(got) | set(want) if got.get(n) != want.get(n)} }")


# ---------------------------------------------------------------------------------------------- rule 6


def test_a_fresh_seed_result_is_quoted_with_one_holm_family():
    """The fresh-seed test of a confirmation claim is Holm over the 4 claims (PLAN.md): wherever docs/studies.md quotes
    its interval with a Holm p, that p is the confirmation family's, not the 8-configuration table's. The claims are
    confirmation.md's; their intervals and p are recomputed here with scipy from the committed per-seed records."""
    claims = re.findall(r"\| (\w+) − baseline, (\w+) \|", (RESULTS / "study_controls" / "confirmation.md").read_text())
    assert len(claims) == 4, f"bench/results/study_controls/confirmation.md: expected the plan's 4 claims, parsed {claims}"
    fresh = json.loads((RESULTS / "study_controls" / "table.json").read_text())["configurations"]
    diffs = [np.subtract(fresh[n]["scores"][m]["values"], fresh["baseline"]["scores"][m]["values"]) for n, m in claims]
    p_family = holm([scipy.stats.ttest_1samp(d, 0).pvalue for d in diffs])
    docs = " ".join(DOCS.read_text().split())   # a quote may break across lines
    quoted = 0
    for (name, metric), d, p in zip(claims, diffs, p_family):
        half = scipy.stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d))
        shown = "{:+.3f} [{:+.3f}, {:+.3f}]".format(d.mean(), d.mean() - half, d.mean() + half).replace("-", "−")
        for hit in re.finditer(re.escape(shown), docs):
            m = re.match(r"[^|]{0,40}?Holm p (\d\.\d+)", docs[hit.end():])
            if m:
                quoted += 1
                assert abs(float(m[1]) - p) < 6e-4, \
                    f"docs/studies.md quotes {name} − baseline, {metric} ({shown}) with Holm p {m[1]}; its family (the 4 claims) gives {p:.3f}"
    assert quoted, "docs/studies.md quotes no fresh-seed result of a confirmation claim with its Holm p"


# ---------------------------------------------------------------------------------------------- rule 7

# Malkiel & Wolf 2021, Table 2 (QNLI column) and Table 3: train / dev accuracy of each (row, column) cell.
PAPER = {("2", "BERT-RTE", "QNLI"): (52.46, 52.84), ("2", "MML-RTE", "QNLI"): (50.86, 51.30),
         ("3", "BERT-MRPC", "STS-B*"): (82.53, 88.58), ("3", "MML-MRPC", "STS-B*"): (86.12, 91.32),
         ("3", "BERT-STS-B*", "MRPC"): (75.59, 75.49), ("3", "MML-STS-B*", "MRPC"): (75.51, 77.94),
         ("3", "BERT-STS-B*", "QQP"): (73.13, 73.11), ("3", "MML-STS-B*", "QQP"): (74.13, 74.40)}
CELL = re.compile(r"Table (\d), row ([\w*-]+) against row ([\w*-]+), ([\w*-]+) column:? ([\d.]+) / ([\d.]+) against "
                  r"([\d.]+) / ([\d.]+), ([+−-][\d.]+)% / ([+−-][\d.]+)%")


@pytest.mark.parametrize("path", [DOCS, RESULTS / "mml_study" / "README.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_a_paper_figure_names_its_cell_and_equals_it(path):
    text = " ".join(path.read_text().split())
    hits = list(CELL.finditer(text))
    assert hits, f"{path.relative_to(REPO)}: no paper figure quoted as 'Table N, row A against row B, C column: …'"
    for m in hits:
        table, row, ref, column = m[1], m[2], m[3], m[4]
        mine, theirs = PAPER[table, row, column], PAPER[table, ref, column]
        assert (float(m[5]), float(m[6]), float(m[7]), float(m[8])) == (*mine, *theirs), \
            f"{path.relative_to(REPO)}: '{m[0]}': the paper's Table {table} has {row} {mine} and {ref} {theirs} in {column}"
        for k, quoted in ((0, m[9]), (1, m[10])):
            assert number(quoted) == pytest.approx(round(100 * (mine[k] / theirs[k] - 1), 2), abs=0.006), \
                f"{path.relative_to(REPO)}: '{m[0]}': {mine[k]} / {theirs[k]} − 1 = {100 * (mine[k] / theirs[k] - 1):+.2f}%"
    for m in re.finditer(r"\+0\.63% / \+2\.50%", text):   # the last column of Table 3: an average over QQP and MRPC
        assert "averages the QQP and MRPC" in text[m.end(): m.end() + 60], \
            f"{path.relative_to(REPO)}: '+0.63% / +2.50%' is Table 3's QQP-and-MRPC average; say so where it is quoted"


# ---------------------------------------------------------------------------------------------- rule 8


@pytest.mark.parametrize("folder", ["study", "study_controls"])
def test_committed_power_and_sign_flip_figures_agree_with_scipy(folder):
    summary = json.loads((RESULTS / folder / "table.json").read_text())["configurations"]
    text = (RESULTS / folder / "table.md").read_text()
    power = next(t for t in markdown_tables(text.split("## Power")[1]) if t)
    holm_table = next(t for t in markdown_tables(text.split("## Multiplicity")[1]) if t)
    family = len(power)
    base = summary["baseline"]["scores"]["overall"]["values"]
    for row, holm_row in zip(power, holm_table):
        values = summary[row["configuration"]]["scores"]["overall"]["values"]
        d = np.subtract(values, base)
        n, sd = len(d), np.std(d, ddof=1)
        for cell, alpha in zip(row["Δ overall"].split(" / "), (0.05, 0.05 / family)):
            got = scipy_power(float(cell) * math.sqrt(n) / sd, n - 1, alpha)
            assert got == pytest.approx(0.8, abs=0.01), \
                f"bench/results/{folder}/table.md, Power, {row['configuration']}: |Δ| {cell} at α {alpha:.4g} has scipy power {got:.3f}"
        flip = scipy.stats.permutation_test((d, np.zeros(n)), lambda a, b, axis: np.mean(a - b, axis=axis),
                                            permutation_type="samples", n_resamples=np.inf).pvalue
        shown = float(HOLM_CELL.fullmatch(holm_row["Δ overall"])[4])
        assert shown == pytest.approx(flip, abs=5e-5), \
            f"bench/results/{folder}/table.md, {row['configuration']}: sign-flip p {shown}, scipy's exact test {flip:.4f}"
    assert all(list(itertools.islice(power, 1))), "no power rows"


def test_the_docs_power_and_sign_flip_columns_agree_with_scipy():
    """docs/studies.md's main multitask table copies each row's sign-flip p and 80%-power Δ by hand: recompute them."""
    rows = {"PALs": "pals", "SMART": "smart", "R3F": "r3f", "PCGrad": "pcgrad", "GradVac": "gradvac",
            "Gradient Compromise,": "grad_compromise_normalize", "Gradient Compromise": "grad_compromise",
            "annealed": "annealed", "cosine STS head + MNR": "mnr", "concat": "concat", "SimCSE": "simcse",
            "head pretraining": "head_pretraining", "PALs after": "pals_after"}
    summary = json.loads((RESULTS / "study" / "table.json").read_text())["configurations"]
    base = summary["baseline"]["scores"]["overall"]["values"]
    main = next(t for t in markdown_tables(DOCS.read_text()) if t and "what the paper reported (dev overall)" in t[0])
    flip_col = next(c for c in main[0] if c.startswith("sign-flip p"))
    power_col = next(c for c in main[0] if c.startswith("80% power"))
    checked = 0
    for row in main:
        key = max((k for k in rows if row["configuration"].startswith(k)), key=len, default=None)
        if key is None:
            continue
        d = np.subtract(summary[rows[key]]["scores"]["overall"]["values"], base)
        flip = scipy.stats.permutation_test((d, np.zeros(len(d))), lambda a, b, axis: np.mean(a - b, axis=axis),
                                            permutation_type="samples", n_resamples=np.inf).pvalue
        where = f"docs/studies.md, main table, {row['configuration'][:40]}"
        assert float(row[flip_col]) == pytest.approx(flip, abs=0.006), f"{where}: sign-flip p {row[flip_col]}, scipy {flip:.4f}"
        for cell, alpha in zip(row[power_col].split(" / "), (0.05, 0.05 / 13)):
            power = scipy_power(float(cell) * math.sqrt(len(d)) / np.std(d, ddof=1), len(d) - 1, alpha)
            assert power == pytest.approx(0.8, abs=0.06), f"{where}: Δ {cell} at α {alpha:.4g} has scipy power {power:.3f}, not 0.8"
        checked += 1
    assert checked == 13, f"docs/studies.md, main table: checked {checked} of the 13 configurations"


# ---------------------------------------------------------------------------------------------- rule 7, CS224N reports

# The CS224N reports' cells the page quotes, copied from the papers' text: (report, table, row, column) -> value.
CS224N = {
    ("Pritsky", "Table 2", "BaseModel: BERT + concat sentences", "Dev. Mean"): 0.648,
    ("Pritsky", "Table 2", "BaseModel + Pal schedule", "Dev. Mean"): 0.741,
    ("Pritsky", "Table 2", "BaseModel + Pal schedule + 1 hidden", "Dev. Mean"): 0.747,
    ("Pritsky", "Table 2", "AdvancedModel: BaseModel + Pal schedule", "Dev. Mean"): 0.758,
    ("Pritsky", "Table 2", "BaseModel + 1 hidden + PCGrad", "Dev. Mean"): 0.729,
    ("Pritsky", "Table 2", "BaseModel + 1 hidden + Vaccine", "Dev. Mean"): 0.737,
    ("Pritsky", "Table 2", "BaseModel + 1 hidden + Grad. compromise (ours)", "Dev. Mean"): 0.733,
    ("Pritsky", "Table 2", "AdvancedModel + PAL (only during finetuning)", "Dev. Mean"): 0.761,
    ("Benton", "Fig. 3", "Ann + Concat", "Overall Performance"): 0.784,
    ("Benton", "Fig. 3", "Ann + CoSim", "Overall Performance"): 0.706,
    ("Benton", "Fig. 3", "Ann + CoSim + MNR", "Overall Performance"): 0.703,
    ("Benton", "Fig. 3", "Equit + Concat", "Overall Performance"): 0.782,
    ("Benton", "Fig. 3", "Equit + CoSim", "Overall Performance"): 0.710,
    ("Benton", "Fig. 3", "Equit + CoSim + MNR", "Overall Performance"): 0.707,
    ("Song/Hu/Pan", "Table 2", "Finetune base model", "Dev Score"): 0.764,
    ("Song/Hu/Pan", "Table 2", "+ SimCSE", "Dev Score"): 0.763,
    ("Song/Hu/Pan", "Table 2", "+ PALs", "Dev Score"): 0.770,
    ("Song/Hu/Pan", "Table 2", "+ SMART (weak)", "Dev Score"): 0.768,
    ("Song/Hu/Pan", "Table 2", "+ SimCSE + PALs + SMART (strong)", "Dev Score"): 0.778,
}
REPORT_PAIR = re.compile(r"(Pritsky|Benton|Song/Hu/Pan) (Table \d|Fig\. \d), row '([^']+)' against row '([^']+)', "
                         r"([\w. ]+?) column: (\d\.\d{3}) against (\d\.\d{3}), ([+−]\d\.\d{3})")
REPORT_CELL = re.compile(r"(Pritsky|Benton|Song/Hu/Pan) (Table \d|Fig\. \d), row '([^']+)', ([\w. ]+?) column: (\d\.\d{3})")


def main_table() -> list[dict]:
    return next(t for t in markdown_tables(DOCS.read_text()) if t and "what the paper reported (dev overall)" in t[0])


def test_a_cs224n_report_figure_names_its_cells_and_equals_them():
    """Each figure of the main table's paper column is quoted as 'REPORT TABLE, row A against row B, COLUMN column:
    a against b, a − b' (or one cell), and equals the report's cells; a row without such a quote says 'no figure'."""
    rows, quotes = main_table(), 0
    for row in rows:
        cell = row["what the paper reported (dev overall)"]
        where = f"docs/studies.md, main table, {row['configuration'][:40]}"
        pairs, singles = list(REPORT_PAIR.finditer(cell)), list(REPORT_CELL.finditer(cell))
        assert pairs or singles or "no figure" in cell, \
            f"{where}: the paper column must quote its cells (report, table, row, column) or say 'no figure': '{cell[:100]}'"
        for m in pairs:
            report, table, a, b, column = m[1], m[2], m[3], m[4], m[5]
            for name, shown in ((a, m[6]), (b, m[7])):
                assert (report, table, name,
                        column) in CS224N, f"{where}: '{m[0]}': no cell {report} {table}, row '{name}', {column}"
                assert float(shown) == CS224N[report, table, name, column], \
                    f"{where}: '{m[0]}': {report} {table}, row '{name}', {column} is {CS224N[report, table, name, column]}"
            assert number(m[8]) == pytest.approx(float(m[6]) - float(m[7]),
                                                 abs=1e-9), f"{where}: '{m[0]}': the difference"
            quotes += 1
        for m in singles:
            key = (m[1], m[2], m[3], m[4])
            assert key in CS224N and float(m[5]) == CS224N[key], f"{where}: '{m[0]}': the report's cell is {CS224N.get(key)}"
            quotes += 1
    assert quotes >= 12, f"docs/studies.md, main table: only {quotes} report cells quoted"


# ---------------------------------------------------------------------------------------------- rule 9

# Rows whose paper comparison is the same comparison as one of ours: configuration -> (results folder, arm, control,
# the report rows it is compared with). Rows left out differ in a named way (PCGrad and GradVac: round robin against
# the PAL schedule; SimCSE: other training sentences; the ensemble: another kind of ensemble; annealed against
# Pritsky's round robin).
LIKE_FOR_LIKE = {
    "PALs": ("study", "pals", "baseline", [("+ PALs", "Finetune base model")]),
    "SMART": ("study", "smart", "baseline", [("+ SMART (weak)", "Finetune base model")]),
    "Gradient Compromise |": ("study", "grad_compromise", "baseline",
                              [("BaseModel + 1 hidden + Grad. compromise (ours)",
                                "BaseModel + Pal schedule + 1 hidden")]),
    "annealed": ("study", "annealed", "baseline", [("Ann + Concat", "Equit + Concat"), ("Ann + CoSim", "Equit + CoSim"),
                                                   ("Ann + CoSim + MNR", "Equit + CoSim + MNR")]),
    "cosine STS head + MNR": ("study_controls", "mnr", "cosine", [("Ann + CoSim + MNR", "Ann + CoSim")]),
    "concat": ("study_controls", "concat", "cosine", [("Ann + Concat", "Ann + CoSim")]),
    "PALs after": ("study", "pals_after", "baseline",
                   [("AdvancedModel + PAL (only during finetuning)", "AdvancedModel: BaseModel + Pal schedule")]),
}


def t_interval_of(folder: str, arm: str, control: str, metric: str = "overall") -> tuple[float, float]:
    configs = json.loads((RESULTS / folder / "table.json").read_text())["configurations"]
    d = np.subtract(configs[arm]["scores"][metric]["values"], configs[control]["scores"][metric]["values"])
    half = scipy.stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d))
    return d.mean() - half, d.mean() + half


# A report's difference of two cells rounded to 3 decimals is known to ±0.001 (each cell ±0.0005).
REPORT_ROUNDING = 0.001


def test_a_papers_effect_outside_our_interval_is_stated():
    """For each like-for-like comparison, every quoted report difference is checked against our 95% t-interval
    (recomputed with scipy from the per-seed records): outside it by more than the cells' rounding, the row must say
    the paper's figure 'lies above our interval' (or below); outside it by less, 'within rounding of' our interval's
    end (never 'just below'); inside it, neither."""
    rows = main_table()
    checked = 0
    for key, (folder, arm, control, pairs) in LIKE_FOR_LIKE.items():
        row = next(r for r in rows if ("| " + r["configuration"] + " |").startswith("| " + key)
                   or r["configuration"].startswith(key))
        text = " | ".join(row.values())
        low, high = t_interval_of(folder, arm, control)
        for m in REPORT_PAIR.finditer(row["what the paper reported (dev overall)"]):
            if (m[3], m[4]) not in pairs:
                continue
            paper = number(m[8])
            side = "above" if paper > high else "below" if paper < low else None
            beyond = max(paper - high, low - paper)   # how far outside our interval (negative: inside)
            where = (f"docs/studies.md, main table, {row['configuration'][:30]}: the paper's {m[8]} "
                     f"({m[3]} against {m[4]}) "
                     f"against our {arm} − {control} [{low:+.4f}, {high:+.4f}]")
            said_side = re.search(rf"{re.escape(m[8])}[^|]{{0,120}}?lies (just )?(above|below) our interval", text)
            if side and beyond > REPORT_ROUNDING:
                assert re.search(rf"{re.escape(m[8])} lies {side} our interval", text), \
                    f"{where}: lies {side} our interval; the row must say so ('the paper's {m[8]} lies {side} our interval')"
            elif side:
                assert re.search(rf"{re.escape(m[8])}[^|]{{0,120}}?within rounding of our interval",
                                 text) and not said_side, \
                    (f"{where}: {beyond:.4f} outside, less than the ±{REPORT_ROUNDING} its 3-decimal cells leave open: "
                     f"the row must say the paper's {m[8]} is 'within rounding of our interval's' end, not "
                     f"that it lies {side} it")
            else:
                assert not said_side, f"{where}: it is inside"
            checked += 1
    assert checked >= 9, f"checked {checked} paper differences"


# Malkiel & Wolf 2021, Table 1, development set rows (×100).
MML_TABLE1_DEV = {("MML", "RTE"): 80.1, ("BERT", "RTE"): 70.4, ("MML", "MRPC"): 89.0, ("BERT", "MRPC"): 88.0,
                  ("MML", "STS-B"): 91.1, ("BERT", "STS-B"): 90.0, ("MML", "CoLA"): 64.5, ("BERT", "CoLA"): 60.6}
MML_GAIN = re.compile(r"Table 1, row MML against row BERT, development set, ([\w-]+) column: ([\d.]+) against ([\d.]+), "
                      r"([+−][\d.]+), (above|below|inside) our interval")


@pytest.mark.parametrize("path", [DOCS, RESULTS / "mml_study" / "README.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_the_mml_papers_gains_are_placed_against_our_intervals(path):
    """Each GLUE task both studies share: the paper's MML − BERT (Table 1, development rows) is quoted with its cells
    and placed above / inside / below our 95% t-interval of MML − BERT (×100, scipy, the committed per-seed records)."""
    per_seed = json.loads((RESULTS / "mml_study" / "table1.json").read_text())["per_seed"]
    text = " ".join(path.read_text().split())
    found = {m[1]: m for m in MML_GAIN.finditer(text)}
    tasks = sorted({t for _, t in MML_TABLE1_DEV})
    where = path.relative_to(REPO)
    assert set(found) == set(tasks), \
        f"{where}: the paper's MML − BERT gain is placed for {sorted(found)}, not all of {tasks}"
    for task, m in found.items():
        mml, bert = MML_TABLE1_DEV["MML", task], MML_TABLE1_DEV["BERT", task]
        assert (float(m[2]), float(m[3])) == (mml, bert), f"{where}: '{m[0]}': Table 1 has {mml} against {bert}"
        assert number(m[4]) == pytest.approx(mml - bert, abs=0.05), f"{where}: '{m[0]}': the difference"
        d = np.subtract(per_seed["mml"][task], per_seed["bert"][task])
        half = scipy.stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d))
        want = "above" if mml - bert > d.mean() + half else "below" if mml - bert < d.mean() - half else "inside"
        assert m[5] == want, \
            f"{where}: '{m[0]}': our interval is [{d.mean() - half:+.1f}, {d.mean() + half:+.1f}]: {want}"


# ---------------------------------------------------------------------------------------------- rule 10


def test_every_per_task_verdict_is_on_the_page_with_its_label():
    """Every per-task Δ of bench/results/study whose Holm p (scipy's paired t, Holm over the configurations of its
    column) is below 0.05 on seeds 1-5 is a row of the page's per-task table, with that Holm p, the one seeds 1-3
    alone give, its verdict word, and 'exploratory' where seeds 1-3 alone did not resolve it; and nothing else is."""
    configs = json.loads((RESULTS / "study" / "table.json").read_text())["configurations"]
    names = [n for n in configs if n not in ("baseline", "ensemble")]
    want = {}
    for metric in ("sst_acc", "para_acc", "sts_pearson"):
        base = configs["baseline"]["scores"][metric]["values"]
        p5 = holm([scipy.stats.ttest_rel(configs[n]["scores"][metric]["values"], base).pvalue for n in names])
        p3 = holm([scipy.stats.ttest_rel(configs[n]["scores"][metric]["values"][:3], base[:3]).pvalue for n in names])
        for n, a, b in zip(names, p5, p3):
            if a < 0.05:
                want[n, metric] = (a, b, "higher" if configs[n]["difference"][metric]["mean"] > 0 else "lower")
    display = {**{v: k for k, v in NAMES.items()}, "mnr": "cosine + MNR", "concat": "concat head"}
    table = next(t for t in markdown_tables(DOCS.read_text()) if t
                 and set(t[0]) >= {"metric", "Holm p, seeds 1–3 alone"})
    got = {}
    for row in table:
        name = next((n for n, shown in display.items() if shown == row["configuration"]), None)
        assert name, f"docs/studies.md, per-task verdicts: unknown configuration '{row['configuration']}'"
        got[name, row["metric"]] = row
    assert set(got) == set(want), (f"docs/studies.md, per-task verdicts: rows {sorted(got)}; the table's per-task "
                                   f"verdicts are {sorted(want)}")
    for key, (p5, p3, word) in want.items():
        row, where = got[key], f"docs/studies.md, per-task verdicts, {key}"
        assert float(row["Holm p, seeds 1–5"]) == pytest.approx(p5, abs=6e-4), f"{where}: Holm p {p5:.3f}"
        assert float(row["Holm p, seeds 1–3 alone"]) == pytest.approx(p3, abs=6e-4), f"{where}: seeds 1-3 Holm p {p3:.3f}"
        assert row["verdict"].startswith(word), f"{where}: the verdict is '{word}'"
        assert ("exploratory" in row["verdict"]) == (p3 >= 0.05), \
            f"{where}: seeds 1-3 alone give Holm p {p3:.3f}: 'exploratory' {'needed' if p3 >= 0.05 else 'wrong'}"


# ---------------------------------------------------------------------------------------------- rule 11

CITED = re.compile(r"bench/results/[\w./*-]+")


@pytest.mark.parametrize("path", [*PAGES, REPO / "README.md", RESULTS / "study_budget.md"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_a_record_a_page_cites_is_committed(path):
    """Every bench/results/... path a page names exists in the repository (a glob matches something), and, where the
    repository is a git checkout, is tracked by git: a page may not cite a record that is not committed."""
    import subprocess
    tracked = None
    if (REPO / ".git").exists():
        out = subprocess.run(["git", "-C", str(REPO), "ls-files", "bench/results"], capture_output=True, text=True)
        tracked = set(out.stdout.split()) if out.returncode == 0 else None
    for m in CITED.finditer(path.read_text()):
        cited = m[0].rstrip(".,)`")
        hits = [p.relative_to(REPO).as_posix() for p in REPO.glob(cited)] if "*" in cited else \
            ([cited] if (REPO / cited).exists() else [])
        assert hits, f"{path.relative_to(REPO)} cites {cited}, which is not in the repository"
        if tracked is not None:
            assert any(h in tracked or any(t.startswith(h.rstrip("/") + "/") for t in tracked) for h in hits), \
                f"{path.relative_to(REPO)} cites {cited}, which is not committed (git ls-files)"


# ---------------------------------------------------------------------------------------------- rule 12, words

OLD_HEADING = "What replicates at small scale"   # the heading overstated: most claims were not confirmed
STUDIES_LINK = re.compile(r"\]\((?:[\w./]*/)?(studies\.md)?#([\w-]+)\)")


def text_files(*patterns: str) -> list[Path]:
    """The repository's files matching the patterns (git's tracked files where it is a checkout), this file left out."""
    import subprocess
    out = subprocess.run(["git", "-C", str(REPO), "ls-files", *patterns], capture_output=True, text=True) \
        if (REPO / ".git").exists() else None
    paths = [REPO / p for p in out.stdout.split()] if out is not None and out.returncode == 0 else \
        [p for pat in patterns for p in REPO.rglob(pat) if not {".git", "runs", ".venv"} & set(p.parts)]
    return [p for p in paths if p.is_file() and p.resolve() != Path(__file__).resolve()]


def github_slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_old_heading_is_gone_and_every_link_to_the_studies_page_resolves():
    """The studies test claims at small scale; most did not replicate, so no page may call the section 'What
    replicates at small scale'. Every link into docs/studies.md (from docs/, README.md, the results READMEs, and its
    own #anchors) names one of its headings' anchors."""
    for path in text_files("*.md", "*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        assert OLD_HEADING.lower() not in text.lower(), \
            f"{path.relative_to(REPO)}: '{OLD_HEADING}' overstates (most claims were not confirmed): name the " \
            "section " \
            "for what it does, 'What the studies test at small scale', and link its new anchor"
    anchors = {github_slug(h) for h in re.findall(r"^#+ (.+)$", DOCS.read_text(), flags=re.M)}
    assert "what-the-studies-test-at-small-scale" in anchors, \
        "docs/studies.md: no heading 'What the studies test at small scale'"
    linked = 0
    for path in [DOCS, *sorted((REPO / "docs").glob("*.md")), REPO / "README.md",
                 *sorted(RESULTS.glob("**/README.md"))]:
        for m in STUDIES_LINK.finditer(path.read_text()):
            if m[1] is None and path != DOCS:
                continue   # a link to an anchor of another page
            linked += 1
            assert m[2] in anchors, f"{path.relative_to(REPO)}: the link '{m[0]}' names no heading of docs/studies.md"
    assert linked >= 3, f"found {linked} links into docs/studies.md"


def chunks(text: str) -> list[str]:
    """A page cut into table cells and sentences, whitespace joined (a sentence may break across lines)."""
    out = []
    for block in re.split(r"\n\s*\n|\n(?=- )", text):   # paragraphs and list items first
        for cell in " ".join(block.split()).split("|"):
            out += re.split(r"(?<=[.;])\s+(?=[A-Z*])", cell)
    return out


NOT_CONFIRMED_AS_ABSENT = [r"(?<!not shown )\babsent\b(?!\")", r"\bno effect\b(?!\")", r"\bno verdict stands\b",
                           r"\b(disproved|refuted|ruled out)\b", r"\bdoes not (help|work)\b"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_not_confirmed_says_its_power_and_never_reads_as_absent(path):
    """'Not confirmed' means 'not shown at the power the seeds had': each cell or sentence that says it states that
    power (a definition of the phrase excepted), and none reads it as absent, no effect or disproved."""
    for chunk in chunks(path.read_text()):
        if "not confirmed" not in chunk.lower():
            continue
        where = f"{path.relative_to(REPO)}: '{chunk[:160]}'"
        assert "power" in chunk or "means" in chunk, f"{where}: say the power it had ('not confirmed at 24% power')"
        for pattern in NOT_CONFIRMED_AS_ABSENT:
            assert not re.search(pattern, chunk), f"{where}: 'not confirmed' is 'not shown', never '{pattern}'"


def test_the_first_confirmations_power_is_stated_as_the_plan_computed_it():
    """The confirmation table of docs/studies.md gives each claim's power as confirmation.md does, its verdict says
    'not confirmed at N% power' with N the power at Holm's first step, and the power at 0.05 (Holm's last step, reached
    only if all four claims are real) is written as an upper bound wherever the prose quotes it ('at most 65%')."""
    source = {row["claim"]: row
              for table in markdown_tables((RESULTS / "study_controls" / "confirmation.md").read_text())
              for row in table}
    page = next(t for t in markdown_tables(DOCS.read_text()) if t and "claim (seeds 1–5: exploratory)" in t[0])
    power_col = next((c for c in page[0] if c.startswith("power at 0.05/4")), None)
    assert power_col, "docs/studies.md, confirmation table: no 'power at 0.05/4 / at most, at 0.05' column"
    for row in page:
        claim = row["claim (seeds 1–5: exploratory)"].split(" (")[0]
        first, last = next(v for k, v in source[claim].items() if k.startswith("power at 0.05/4")).split(" / ")
        where = f"docs/studies.md, confirmation table, {claim}"
        assert row[power_col] == f"{first} / {last}", f"{where}: confirmation.md gives power {first} / {last}"
        if row["verdict"].startswith("not confirmed"):
            said = f"at {round(float(first) * 100)}% power"
            assert said in row["verdict"], f"{where}: 'not confirmed {said}'"
    text = " ".join(DOCS.read_text().split())
    for m in re.finditer(r"\d+(?:–\d+)?% at 0\.05(?![/\d])", text):
        assert text[max(0, m.start() - 8): m.start()] == "at most ", \
            f"docs/studies.md: '…{text[max(0, m.start() - 60): m.end()]}': the power at 0.05 is Holm's last step, " \
            f"an upper bound: 'at most {m[0]}'"


def power_factor(n: int, alpha: float) -> float:
    """The true Δ, in sd of the paired differences, that a two-sided paired t-test over n seeds detects with 80%
    power at alpha (scipy's noncentral t, by bisection)."""
    low, high = 0.1, 100.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if scipy_power(mid * math.sqrt(n), n - 1, alpha) < 0.8 else (low, mid)
    return high


def test_the_power_factors_for_three_seeds_name_the_families_there_are():
    """'With 3 seeds they are A (at 0.05) and B to C (at 0.05/m, …: m = …)': m lists every 3-seed Holm family of the
    committed studies (the controls against the baseline and against their control, the first confirmation's
    claims, the MML methods), and A, B, C are scipy's factors for 3 seeds at 0.05, the smallest and the largest m."""
    controls = json.loads((RESULTS / "study_controls" / "table.json").read_text())["configurations"]
    claims = re.findall(r"\| (\w+) − baseline, (\w+) \|",
                        (RESULTS / "study_controls" / "confirmation.md").read_text())
    methods = json.loads((RESULTS / "mml_study" / "table1.json").read_text())["per_seed"]
    families = {len(controls) - 1, sum(1 for c in controls.values() if c.get("control")), len(claims), len(methods) - 1}
    text = " ".join(DOCS.read_text().split())
    m = re.search(r"with 3 seeds they are ([\d.]+) \(at 0\.05\) and ([\d.]+) to ([\d.]+) "
                  r"\(at 0\.05/m, [^:]*: m = ([\d, and]+)\)", text)
    assert m, "docs/studies.md, 'Power': no sentence 'with 3 seeds they are A (at 0.05) and B to C (at 0.05/m, …: " \
              "m = …)'"
    listed = {int(x) for x in re.findall(r"\d+", m[4])}
    assert listed == families, f"docs/studies.md: '{m[0]}': the 3-seed families have m = {sorted(families)}"
    for shown, alpha in ((m[1], 0.05), (m[2], 0.05 / min(families)), (m[3], 0.05 / max(families))):
        assert float(shown) == pytest.approx(power_factor(3, alpha), abs=0.051), \
            f"docs/studies.md: '{m[0]}': at α {alpha:.4g} scipy gives {power_factor(3, alpha):.2f}, not {shown}"


def test_the_mml_words_follow_table1():
    """Where MML's mean is above BERT's on some task (table1.json), no page says it is not above on any task or at or
    below everywhere; where a method's Average gap is not (almost) all one task's, no page says it is 'all' or
    'both' from that task (before the STS-B rerun too: the old STS-B records)."""
    ps = json.loads((RESULTS / "mml_study" / "table1.json").read_text())["per_seed"]
    tasks = [t for t in ps["bert"] if t != "Average"]
    gap = {m: {t: float(np.mean(np.subtract(ps[m][t], ps["bert"][t]))) / len(tasks) for t in tasks} for m in ps}
    above = [t for t in tasks if gap["mml"][t] > 0]
    old = {}
    for m in ("mv1024", "ensemble1024", "mml", "bert"):
        old[m] = [max(json.loads(line)["spearman"] for line in open(f) if line.strip()) * 100
                  for f in sorted((RESULTS / "mml_study" / "runs_nn_linear_init" / "STS-B" / m).glob("seed*/*.jsonl"))]
    old_share = [float(np.mean(np.subtract(old[m], old["bert"]))) / len(tasks) /
                 (float(np.mean(np.subtract(old[m], old["bert"]))) / len(tasks)
                  + sum(v for t, v in gap[m].items() if t != "STS-B"))
                 for m in ("mv1024", "ensemble1024", "mml")]
    cola_share = [gap[m]["CoLA"] / sum(gap[m].values()) for m in ("mv1024", "ensemble1024")]
    for path in [DOCS, RESULTS / "mml_study" / "README.md"]:
        text = " ".join(path.read_text().split())
        if above:
            for pattern in (r"not above BERT'?s? on any task", r"at or\s+below BERT's"):
                m = re.search(pattern, text)
                assert m is None, \
                    f"{path.relative_to(REPO)}: '{m and m[0]}': MML − BERT is above 0 on {above} (table1.json)"
        if min(cola_share) < 0.95:
            assert not re.search(r"\b(both|all|wholly|entirely) from CoLA", text), \
                f"{path.relative_to(REPO)}: CoLA is {cola_share[0]:.0%} and {cola_share[1]:.0%} of the Average " \
                "gaps: 'mostly', not 'all'"
        if min(old_share) < 0.95:
            assert not re.search(r"\b(both|all|wholly|entirely) from the collapsed", text), \
                f"{path.relative_to(REPO)}: the old STS-B runs are {min(old_share):.0%}–{max(old_share):.0%} of " \
                "the old Average gaps: 'mostly'"


HOLD_OUT_CELL = re.compile(r"[+-]\d+\.\d \[[+-]\d+\.\d, [+-]\d+\.\d\]( \(noise\))?")


def test_every_hold_out_lead_is_listed():
    """A hold-out cell of cross_dataset.md whose unadjusted interval excludes 0 but whose Holm p is ≥ 0.05 is a lead
    for more seeds: docs/studies.md and the MML README quote each with its Holm p."""
    tables = markdown_tables((RESULTS / "mml_study" / "cross_dataset.md").read_text())
    leads = []
    for diffs, holms in zip(tables, tables[1:]):
        if not diffs or not any(HOLD_OUT_CELL.fullmatch(c) for r in diffs for c in r.values()):
            continue
        by_row = {next(iter(r.values())): r for r in holms}
        for row in diffs:
            name = next(iter(row.values()))
            for column, cell in row.items():
                h = HOLM_CELL.fullmatch(by_row.get(name, {}).get(column, ""))
                if HOLD_OUT_CELL.fullmatch(cell) and "(noise)" not in cell and h and float(h[1]) >= 0.05:
                    leads.append((name, column, h[1]))
    assert len(leads) >= 4, f"cross_dataset.md: parsed {leads}"
    for path in [DOCS, RESULTS / "mml_study" / "README.md"]:
        text = " ".join(path.read_text().split())
        for name, column, p in leads:
            assert p in text, f"{path.relative_to(REPO)}: the lead {name} on {column} (Holm p {p}) is not listed"


# Pritsky, Somerville & Huynh, Table 2: the row whose Dev. Mean shows what the column is: (SST, Paraphrase, STS, Mean).
PRITSKY_ROW = ("BaseModel: BERT + concat sentences", 0.465, 0.731, 0.749, 0.648)
PRITSKY_LIKE = ["grad_compromise", "pals_after", "pcgrad", "gradvac", "annealed"]


def test_pritskys_dev_mean_is_compared_on_its_own_scale():
    """Pritsky's Dev. Mean is the plain mean of SST, Quora and STS r (r unscaled: its cells show it); our dev overall
    rescales r to (r + 1)/2. The page says so and quotes, for each configuration compared with a Pritsky row, our
    paired Δ on their scale with its 95% t-interval (scipy, the committed per-seed records)."""
    name, sst, para, sts, mean = PRITSKY_ROW
    assert CS224N["Pritsky", "Table 2", name, "Dev. Mean"] == mean == pytest.approx((sst + para + sts) / 3, abs=6e-4)
    text = " ".join(DOCS.read_text().split())
    assert "(r + 1)/2" in text and "plain mean" in text, \
        "docs/studies.md: say that Pritsky's Dev. Mean is the plain mean of SST, Quora and r, ours (r + 1)/2"
    configs = json.loads((RESULTS / "study" / "table.json").read_text())["configurations"]
    theirs = {n: np.add(np.add(configs[n]["scores"]["sst_acc"]["values"], configs[n]["scores"]["para_acc"]["values"]),
                        configs[n]["scores"]["sts_pearson"]["values"]) / 3 for n in [*PRITSKY_LIKE, "baseline"]}
    for n in PRITSKY_LIKE:
        d = theirs[n] - theirs["baseline"]
        half = scipy.stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d))
        shown = "{:+.3f} [{:+.3f}, {:+.3f}]".format(d.mean(), d.mean() - half, d.mean() + half).replace("-", "−")
        assert shown in text, f"docs/studies.md: {n} − baseline on Pritsky's scale is {shown}; quote it"


def section(text: str, heading: str) -> str:
    """The part of a page from a heading to the next heading of level 2 or 3."""
    assert heading in text, f"docs/studies.md: no heading '{heading}'"
    start = text.index(heading)
    nxt = re.search(r"^#{2,3} ", text[start + len(heading):], flags=re.M)   # "# " alone: a comment in a code block
    return text[start: start + len(heading) + (nxt.start() if nxt else len(text))]


def test_the_study_command_says_which_epoch_it_scores():
    """When `python bench/study.py`'s default --select_epoch differs from the rule the committed tables were made
    with (their table.json), the commands section says which the command scores and how to remake the tables."""
    default = re.search(r'"--select_epoch", choices=\([^)]*\), default="(\w+)"',
                        (REPO / "bench" / "study.py").read_text())[1]
    rules = {json.loads((RESULTS / f / "table.json").read_text())["select_epoch"] for f in ("study", "study_controls")}
    text = section(DOCS.read_text(), "## What the studies test at small scale")
    for rule in rules - {default}:
        flat = " ".join(text.split())
        assert f"`--select_epoch {rule}`" in flat and f"`--select_epoch {default}`" in flat, \
            f"docs/studies.md, commands: the command scores the {default} epoch, the committed tables are " \
            f"{rule}-epoch: say which"


def test_the_benchmarks_row_describes_the_confirmation_script():
    """docs/benchmarks.md's row for bench/study_confirmation.py names every plan the script reads (its docstring's
    PLAN.md paths), every flag it takes and every page it writes."""
    script = (REPO / "bench" / "study_confirmation.py").read_text()
    row = next(line for line in (REPO / "docs" / "benchmarks.md").read_text().splitlines()
               if line.startswith("| `bench/study_confirmation.py`"))
    for plan in sorted(set(re.findall(r"bench/results/\w+/PLAN\.md", script))):
        assert plan in row, f"docs/benchmarks.md, study_confirmation.py's row: it reads {plan}; say so"
    for flag in re.findall(r'add_argument\("(--\w+)"', script):
        assert flag in row, f"docs/benchmarks.md, study_confirmation.py's row: it takes {flag}; say what it does"
    for page in sorted(set(re.findall(r'"(study_\w+)", "confirmation\.md"', script))):
        assert f"{page}/confirmation.md" in row, \
            f"docs/benchmarks.md, study_confirmation.py's row: it writes {page}/confirmation.md"


PLAN = RESULTS / "study_confirmation" / "PLAN.md"
PLAN_COMMIT = "eb77581"   # the plan as committed before its first run


def test_the_plans_erratum_counts_what_its_commands_run_and_what_its_power_code_gives():
    """PLAN.md ends with an ERRATUM; above it the plan is byte for byte as committed. The erratum's run count is what
    the plan's two commands run, and its seed counts for the dropped claim (head_pretraining − baseline, dev overall,
    seeds 6-8 at the final epoch) are scipy's smallest n with 80% power at 0.05/4 and 0.05/3."""
    import subprocess
    text = PLAN.read_text()
    assert "\n## ERRATUM" in text, "bench/results/study_confirmation/PLAN.md: no '## ERRATUM' section at its end"
    plan, erratum = text.split("\n## ERRATUM", 1)
    assert "\n## " not in erratum, "PLAN.md: the ERRATUM is the last section"
    if (REPO / ".git").exists():
        out = subprocess.run(["git", "-C", str(REPO), "show", f"{PLAN_COMMIT}:{PLAN.relative_to(REPO).as_posix()}"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            assert out.stdout == plan, \
                f"PLAN.md: the text above the ERRATUM differs from the plan as committed ({PLAN_COMMIT})"
    runs = 0
    for command in re.findall(r"python -m minbert study (.*?)--out_dir", " ".join(plan.replace("\\\n", " ").split())):
        configs = re.search(r"--configs (\S+)", command)[1].split(",")
        seeds = len(re.search(r"--seeds ([\d,]+)", command)[1].split(","))
        fewer = dict(kv.split("=") for kv in re.search(r"--seeds_per_config (\S+)", command)[1].split(","))
        runs += sum(int(fewer.get(c, seeds)) for c in configs)
    assert runs > 0 and re.search(rf"\b{runs} runs\b",
                                  erratum), f"PLAN.md, ERRATUM: the plan's commands run {runs} runs; say so"

    def final(config, seed):
        record = RESULTS / "study_controls" / "runs" / config / f"seed{seed}" / "metrics.jsonl"
        lines = record.read_text().splitlines()
        return max((json.loads(x) for x in lines if x.strip()), key=lambda r: r["epoch"])["overall"]
    d = [final("head_pretraining", s) - final("baseline", s) for s in (6, 7, 8)]
    delta, sd = abs(float(np.mean(d))), float(np.std(d, ddof=1))

    def seeds_needed(alpha):
        low, high = 2, 2000   # power grows with n: bisection on scipy's power
        while low < high:
            mid = (low + high) // 2
            low, high = (mid + 1, high) if scipy_power(delta * math.sqrt(mid) / sd, mid - 1,
                                                       alpha) < 0.8 else (low, mid)
        return low
    n4, n3 = seeds_needed(0.05 / 4), seeds_needed(0.05 / 3)
    assert f"{n4} seeds at 0.05/4 and {n3} at 0.05/3" in " ".join(erratum.split()), \
        f"PLAN.md, ERRATUM: the dropped claim needs {n4} seeds at 0.05/4 and {n3} at 0.05/3 " \
        f"(scipy, δ {delta:.5f}, σ {sd:.5f})"


def test_the_running_confirmation_points_to_its_amendment_and_log():
    """While the second confirmation runs, its section of docs/studies.md links the amendment it runs under and its
    run log, and says that no result has been read."""
    text = DOCS.read_text()
    heading = next(line for line in text.splitlines() if line.startswith("### A second confirmation"))
    body = " ".join(section(text, heading).split())
    if (RESULTS / "study_confirmation" / "confirmation.md").exists():
        return   # finished: its verdicts replace this section
    for page in ("AMENDMENT.md", "PROGRESS.md"):
        assert f"(../bench/results/study_confirmation/{page})" in body, f"docs/studies.md, '{heading}': link {page}"
    assert re.search(r"no result\b[^.]{0,40}\bread",
                     body), f"docs/studies.md, '{heading}': say that no result of the runs has been read"


def test_the_second_confirmations_verdicts_on_the_page_are_the_committed_ones():
    """docs/studies.md's table of the second confirmation quotes bench/results/study_confirmation/confirmation.md: each
    claim's Δ, both intervals, Holm p and power; its verdict follows the sign and the Holm p (recomputed here with
    scipy from the committed per-seed scores), and a "not confirmed" names the power it had at the new sd."""
    page = (RESULTS / "study_confirmation" / "confirmation.md").read_text()
    committed = {r.get("claim", r.get("comparison")).split()[0]: r for t in markdown_tables(page) for r in t}
    heading = next(line for line in DOCS.read_text().splitlines() if line.startswith("### A second confirmation"))
    rows = next(t for t in markdown_tables(section(DOCS.read_text(), heading)) if t and "claim" in t[0])
    summary = json.loads((RESULTS / "study_confirmation" / "table.json").read_text())["configurations"]
    families = {"C": [], "E": []}
    for row in rows:
        cid = row["claim"].split()[0]
        families[cid[0]].append((cid, row))
    assert len(families["C"]) == 3 and len(families["E"]) == 2, \
        f"docs/studies.md, '{heading}': one row per planned claim (C1-C3, E1-E2), got {[r['claim'] for r in rows]}"
    metric_of = {"SST acc": "sst_acc", "Quora acc": "para_acc", "dev overall": "overall"}
    for fam, members in families.items():
        p = []
        for cid, row in members:
            mine = committed[cid]
            where = f"docs/studies.md, '{heading}', {cid}"
            for docs_col, page_col in (("Δ [95%, seeds]", "Δ [95%, seeds]"),
                                       ("[95%, seeds × dev examples]", "[95%, seeds × dev examples]")):
                assert row[docs_col].replace("−", "-") == mine[page_col].replace(" (noise)", ""), \
                    f"{where}: {docs_col} {row[docs_col]!r}, confirmation.md gives {mine[page_col]!r}"
            assert row["Holm p"].split()[0] == mine["Holm p"], f"{where}: Holm p, confirmation.md gives {mine['Holm p']}"
            name, against = mine.get("claim", mine.get("comparison")).split()[1], \
                mine.get("claim", mine.get("comparison")).split()[3].rstrip(",")
            metric = metric_of[row["metric"]]
            scores = {c: dict(zip(summary[c]["seeds"], summary[c]["scores"][metric]["values"])) for c in (name, against)}
            seeds = list(range(9, 9 + int(mine["n"])))
            d = np.array([scores[name][s] - scores[against][s] for s in seeds])
            p.append(scipy.stats.ttest_rel(d, np.zeros(len(d))).pvalue)
        for (cid, row), adjusted in zip(members, holm(p)):
            d_mean = number(row["Δ [95%, seeds]"].split()[0])
            if fam == "C":
                want = "confirmed" if d_mean > 0 and adjusted < 0.05 else "not confirmed"
            else:
                want = "noise" if adjusted >= 0.05 else ("higher" if d_mean > 0 else "lower")
            got = row["verdict"].strip("*")
            assert got.split(" at ")[0] == want, f"docs/studies.md, '{heading}', {cid}: verdict {got!r}, Holm p " \
                                                 f"{adjusted:.3f} (scipy) and Δ {d_mean:+.4f} give {want!r}"
            if want == "not confirmed":
                new_sd = committed[cid]["power at the new sd, 0.05/3 / 0.05"].split(" / ")[0]
                assert got == f"not confirmed at {round(float(new_sd) * 100)}% power", \
                    f"docs/studies.md, '{heading}', {cid}: say the power it had at the new sd ({new_sd})"


# ---------------------------------------------------------------------------------------------- rule 13
# The second confirmation's sentences say what their numbers say: each figure as the committed records give it
# (scipy on the per-seed scores, the records' own fields), each claim with the scope the records give it.

CONFIRMATION = RESULTS / "study_confirmation"
CONFIRMATION_PAGES = [DOCS, CONFIRMATION / "confirmation.md", CONFIRMATION / "PROGRESS.md",
                      RESULTS / "study_controls" / "confirmation.md"]


def paired(folder: str, arm: str, control: str, metric: str, n: int | None = None) -> np.ndarray:
    """arm − control on the same seeds (the first n of the arm's), from a study's committed table.json."""
    configs = json.loads((RESULTS / folder / "table.json").read_text())["configurations"]
    mine, base = ({s: v for s, v in zip(configs[c]["seeds"], configs[c]["scores"][metric]["values"])}
                  for c in (arm, control))
    seeds = [s for s in sorted(mine) if s in base][:n]
    return np.array([mine[s] - base[s] for s in seeds])


def interval3(d: np.ndarray) -> str:
    """Δ [95% t-interval] at 3 decimals, each end rounded once from its unrounded value (scipy's t quantile)."""
    half = scipy.stats.t.ppf(0.975, len(d) - 1) * np.std(d, ddof=1) / math.sqrt(len(d))
    return "{:+.3f} [{:+.3f}, {:+.3f}]".format(d.mean(), d.mean() - half, d.mean() + half).replace("-", "−")


@pytest.mark.parametrize("folder,arm,metric,n", [("study_confirmation", "head_pretraining", "sst_acc", 6),
                                                  ("study", "pals_after", "sst_acc", None)])
def test_a_three_decimal_interval_is_rounded_once_from_its_unrounded_ends(folder, arm, metric, n):
    """A Δ [95% CI] quoted at 3 decimals rounds each end once from its unrounded value, not from the table's 4-decimal
    cell (C1's low end is 0.01647: +0.016, not +0.017 from +0.0165), and every quote of it on the page agrees."""
    want = interval3(paired(folder, arm, "baseline", metric, n))
    text = " ".join(DOCS.read_text().split())
    mean = want.split(" [")[0]
    quotes = re.findall(re.escape(mean) + r" \[[+−]\d\.\d{3}, [+−]\d\.\d{3}\]", text)
    hi = want.split(", ")[1]
    quotes = [q for q in quotes if q.endswith(hi) or q.split(", ")[0] == want.split(", ")[0]]   # this comparison's
    assert quotes, f"docs/studies.md: {arm} − baseline, {metric} ({folder}) is {want}; quote it"
    for q in quotes:
        assert q == want, f"docs/studies.md: '{q}': {arm} − baseline, {metric} ({folder}) is {want} (each end " \
                          "rounded once from scipy's unrounded interval)"


def test_the_planned_power_is_computed_from_the_plans_unrounded_inputs():
    """confirmation.md's planned power is what PLAN.md's table gives (the plan's power code on the unrounded δ and σ
    of seeds 6-8), and docs/studies.md quotes the same; scipy agrees on the unrounded inputs from the records."""
    plan = {r["claim"].split()[0]: r for t in markdown_tables(PLAN.read_text().split("\n## ERRATUM")[0])
            for r in t if r.get("claim", "").startswith("C")}
    page = {r["claim"].split()[0]: r for t in markdown_tables((CONFIRMATION / "confirmation.md").read_text())
            for r in t if r.get("claim", "").startswith("C")}
    heading = next(line for line in DOCS.read_text().splitlines() if line.startswith("### A second confirmation"))
    docs = {r["claim"].split()[0]: r for t in markdown_tables(section(DOCS.read_text(), heading))
            for r in t if r.get("claim", "").startswith("C")}
    claims = {"C1": ("head_pretraining", "sst_acc"), "C2": ("concat", "para_acc"), "C3": ("mnr", "para_acc")}
    for cid, (arm, metric) in claims.items():
        planned = plan[cid]["power at N: 0.05/3 / 0.05"]
        got = page[cid]["planned power at 0.05/3 / 0.05"]
        assert got == planned, f"study_confirmation/confirmation.md, {cid}: planned power {got}, PLAN.md {planned}"
        d = []
        for s in (6, 7, 8):
            recs = {c: max((json.loads(x) for x in (RESULTS / "study_controls" / "runs" / c / f"seed{s}" /
                                                      "metrics.jsonl").read_text().splitlines() if x.strip()),
                           key=lambda r: r["epoch"])[metric] for c in (arm, "baseline")}
            d.append(recs[arm] - recs["baseline"])
        n = int(plan[cid]["n at 0.05/3"])
        lam = abs(np.mean(d)) * math.sqrt(n) / np.std(d, ddof=1)
        want = f"{scipy_power(lam, n - 1, 0.05 / 3):.2f} / {scipy_power(lam, n - 1, 0.05):.2f}"
        assert got == want, f"confirmation.md, {cid}: planned power {got}, scipy on the unrounded δ, σ: {want}"
        assert docs[cid]["power planned / at the new sd"].startswith(planned.split(" / ")[0] + " /"), \
            f"docs/studies.md, second confirmation, {cid}: the planned power is {planned} (PLAN.md)"
    for m in re.finditer(r"the planned (\d+)% and (\d+)%", " ".join(DOCS.read_text().split())):
        want = [round(float(plan[c]["power at N: 0.05/3 / 0.05"].split(" / ")[0]) * 100) for c in ("C2", "C3")]
        assert [int(m[1]), int(m[2])] == want, f"docs/studies.md: '{m[0]}': PLAN.md gives {want[0]}% and {want[1]}%"


def test_the_surgery_verdict_states_its_scope_and_what_no_distribution_free_test_could_reach():
    """'At equal updates, surgery is higher' is one budget, 5 seeds and Holm p 0.048: the sentence says so inside its
    bold, and gives the floor of any test that assumes only symmetry about 0 (all 2^n sign patterns equally likely):
    2/2^n two-sided, 1/2^n one-sided, and twice the two-sided floor after Holm over the 2 comparisons."""
    e = [paired("study_confirmation", arm, "baseline_every_task", "overall") for arm in ("pcgrad", "gradvac")]
    n = len(e[0])
    p = holm([scipy.stats.ttest_rel(d, np.zeros(n)).pvalue for d in e])
    text = " ".join(DOCS.read_text().split())
    m = re.search(r"\*\*At equal updates[^*]*\*\*[^\n]*?(?=\s-\s\*\*|\*\*A best CPU recipe)", text)
    assert m, "docs/studies.md: no bold sentence 'At equal updates, …'"
    bold, whole = m[0].split("**")[1], m[0]
    for words in (f"{n} seeds", "one budget"):
        assert words in bold, f"docs/studies.md: '**{bold}**': give its scope inside the bold ('{words}')"
    assert f"Holm p {max(p):.3f}" in whole, f"docs/studies.md: '{whole[:120]}…': Holm p {max(p):.3f} (scipy)"
    floors = {"two-sided": 2 / 2 ** n, "one-sided": 1 / 2 ** n, "after Holm over 2": 2 * 2 / 2 ** n}
    for name, floor in floors.items():
        assert f"{floor:.4f}".rstrip("0") in whole or f"{floor:.3f}" in whole, \
            f"docs/studies.md: '{whole[:120]}…': no distribution-free test over {n} seeds goes below {floor:.4f} " \
            f"({name}); say so"


def test_a_seed_count_for_a_future_run_comes_with_its_power_calculation():
    """A page that asks for 'N or more seeds' gives the power calculation behind N in the same sentence."""
    for path in CONFIRMATION_PAGES:
        for chunk in chunks(path.read_text()):
            for m in re.finditer(r"\b\d+ or more seeds\b", chunk):
                assert "power" in chunk, f"{path.relative_to(REPO)}: '{chunk[:160]}': '{m[0]}' with no power " \
                                         "calculation behind it"


def test_the_study_baseline_is_not_called_the_readme_recipe_when_their_budgets_differ():
    """The studies' baseline runs the study budget (table.json); the README's CPU recipe is bench/bench_multitask.py's
    (its --epochs default). Where they differ, no page says a recipe run 'would have compared the recipe with
    itself'."""
    budget = json.loads((CONFIRMATION / "table.json").read_text())["budget"]
    study_epochs = int(budget[budget.index("--epochs") + 1])
    recipe_epochs = int(re.search(r'"--epochs", type=int, default=(\d+)',
                                  (REPO / "bench" / "bench_multitask.py").read_text())[1])
    if study_epochs != recipe_epochs:
        text = " ".join(DOCS.read_text().split())
        assert "the recipe with itself" not in text, \
            f"docs/studies.md: the study's baseline runs {study_epochs} epochs of 6,000 examples, the CPU recipe " \
            f"{recipe_epochs} full epochs: a recipe run would not compare the recipe with itself"


def results_read_before_the_end(progress: str) -> list[str]:
    """The times of PROGRESS.md's rows that say a result (scores, a table) was seen before the last run finished."""
    return re.findall(r"at (\d\d:\d\d)[^|]*?(?:showed its epoch-2 scores|printed its table)", progress)


def test_no_page_says_no_result_was_read_where_the_log_records_one():
    """PROGRESS.md records a run's scores seen at 10:31 and a table at 10:36, before all planned runs had been
    collected: a sentence saying no result was read before the last run finished names those moments."""
    seen = results_read_before_the_end((CONFIRMATION / "PROGRESS.md").read_text())
    assert seen, "PROGRESS.md: parsed no row of a result seen before the end ('at 10:31 … showed its epoch-2 scores')"
    for path in (DOCS, CONFIRMATION / "PROGRESS.md"):
        for chunk in chunks(path.read_text()):
            if re.search(r"\bno result\b[^.]{0,40}\bread\b", chunk) and re.search(r"\b(before|until)\b", chunk):
                for time in seen:
                    assert time in chunk, f"{path.relative_to(REPO)}: '{chunk[:160]}': PROGRESS.md records a result " \
                                          f"seen at {time} before the last run finished; say so here"


def test_the_log_says_whose_clock_the_resumed_seed22_record_carries():
    """At the plan's commit a run's elapsed_s counts from the start of the writing process's training loop, and a
    resume restores the earlier epochs' lines from the checkpoint: an epoch-2 elapsed_s below epoch 1's was written
    by the process that resumed. PROGRESS.md then says so, with the two figures, and not that A's write came last."""
    records = [json.loads(x) for x in (CONFIRMATION / "runs" / "baseline" / "seed22" / "metrics.jsonl").read_text()
               .splitlines() if x.strip()]
    first, second = (next(r["elapsed_s"] for r in records if r["epoch"] == e) for e in (1, 2))
    text = " ".join((CONFIRMATION / "PROGRESS.md").read_text().split())
    if second < first:
        assert "A's write came last" not in text, \
            f"PROGRESS.md: baseline seed 22's epoch-2 elapsed_s ({second}) is below its epoch-1 ({first}): the " \
            "record was written by the resumed process, so A's write did not come last"
        assert f"{second}" in text and f"{first}" in text, \
            f"PROGRESS.md: say what the record shows (elapsed_s {first} at epoch 1, {second} at epoch 2)"


def test_the_log_names_every_start_of_commands_txt_and_says_it_lists_a_repeat_once():
    """Each header of commands.txt is a start of A or B: PROGRESS.md names its time; and since a collection does not
    write again a line already committed, PROGRESS.md and commands.txt say that a restarted run appears once."""
    commands = (CONFIRMATION / "commands.txt").read_text()
    progress = " ".join((CONFIRMATION / "PROGRESS.md").read_text().split())
    starts = sorted(set(re.findall(r"^# \d{4}-\d\d-\d\d (\d\d:\d\d): ", commands, flags=re.M)))
    assert len(starts) >= 5, f"commands.txt: parsed the starts {starts}"
    for time in starts:
        assert time in progress, f"PROGRESS.md: commands.txt records a start at {time}; the log does not name it"
    from bench.study_confirmation import merged_history
    if merged_history("run x\n", ["run x\n"]).count("run x") == 1:   # a restart's line, already committed
        notes = " ".join(line for line in commands.splitlines() if line.startswith("# Note"))
        for where, text in (("PROGRESS.md", progress), ("commands.txt", notes)):
            assert re.search(r"appears? (only )?once", text), \
                f"{where}: a collection writes a repeated command line once, so a restarted run appears once: say so"


def test_no_stale_editing_note_is_left_on_a_page():
    """A page states what is, not what a line replaced ('This replaces "…"'): those notes belong in commit messages."""
    for path in PAGES + CONFIRMATION_PAGES:
        for m in re.finditer(r"\b[Rr]eplaces \"[^\"]*\"", " ".join(path.read_text().split())):
            pytest.fail(f"{path.relative_to(REPO)}: '{m[0]}': an editing note on the page")


def test_the_dropped_claims_detectable_effect_is_given_as_the_plan_asked():
    """PLAN.md: the dropped claim (head_pretraining − baseline, dev overall) is reported 'with the |Δ| those seeds
    could detect'. confirmation.md's secondary row gives it, and docs/studies.md quotes it: scipy's 80%-power effect
    over C1's six seeds at 0.05 (and table.md's Holm family of its column)."""
    d = paired("study_confirmation", "head_pretraining", "baseline", "overall", 6)
    sd, n = float(np.std(d, ddof=1)), len(d)
    family = len(json.loads((CONFIRMATION / "table.json").read_text())["configurations"]) - 1
    want = [f"{power_factor(n, a) * sd:.4f}" for a in (0.05, 0.05 / family)]
    row = next(r for t in markdown_tables((CONFIRMATION / "confirmation.md").read_text()) for r in t
               if r.get("comparison", "").startswith("head_pretraining − baseline, overall"))
    col = next((c for c in row if c.startswith("80% power")), None)
    assert col and row[col] == f"{want[0]} / {want[1]}", \
        f"confirmation.md, secondary, head_pretraining − baseline, overall: the |Δ| detectable with 80% power is " \
        f"{want[0]} at 0.05 / {want[1]} at 0.05/{family} (scipy); got {col and row[col]!r}"
    text = " ".join(DOCS.read_text().split())
    assert f"{want[0]}" in text and f"{want[1]}" in text, \
        f"docs/studies.md: the dropped claim's detectable |Δ| ({want[0]} / {want[1]}) is not quoted"


def test_the_machine_model_is_named_from_the_records_or_said_to_be_missing_from_them():
    """A page names the CPU's family and model only as the records give them; where the records (table.json's
    machine, commands.txt's headers) do not carry them, the sentence that names them says where they come from
    (the hand-written AMENDMENT.md and PROGRESS.md) and that the runs did not record them."""
    machine = json.loads((CONFIRMATION / "table.json").read_text())["machine"]
    recorded = "cpu_model" in machine
    for path in (DOCS, CONFIRMATION / "confirmation.md"):
        for chunk in chunks(path.read_text()):
            if re.search(r"model 17|Zen 4", chunk):
                where = f"{path.relative_to(REPO)}: '{chunk[:160]}'"
                if recorded:
                    assert f"model {machine['cpu_model']}" in chunk, f"{where}: the records give model " \
                                                                    f"{machine['cpu_model']}"
                else:
                    assert "AMENDMENT.md" in chunk and re.search(r"\b(do not|did not|does not) (record|name)\b",
                                                                 chunk), \
                        f"{where}: the runs' records name the CPU '{machine['cpu']}' only; say that the model is " \
                        "from AMENDMENT.md and PROGRESS.md, not from the records"


def test_the_first_confirmations_page_gives_the_power_at_005_as_an_upper_bound():
    """study_controls/confirmation.md: the power at 0.05 is Holm's last step, reached only if all four claims are
    real: its column says 'at most'."""
    header = next(t for t in markdown_tables((RESULTS / "study_controls" / "confirmation.md").read_text()) if t)[0]
    col = next(c for c in header if c.startswith("power"))
    assert "at most" in col, f"study_controls/confirmation.md: column '{col}': the power at 0.05 is an upper bound"


def test_pcgrad_and_gradvac_are_one_method_only_where_the_records_say_so():
    """GradVac equals PCGrad while its EMA target stays at 0; on seeds 9-13 their per-seed scores differ (table.json).
    No page says they 'stayed one method' then, and docs/studies.md quotes the largest per-seed difference."""
    configs = json.loads((CONFIRMATION / "table.json").read_text())["configurations"]
    gap = max((abs(a - b), m) for m in ("sst_acc", "para_acc", "sts_pearson")
              for a, b in zip(configs["pcgrad"]["scores"][m]["values"], configs["gradvac"]["scores"][m]["values"]))
    if gap[0] > 0:
        text = " ".join(DOCS.read_text().split())
        assert not re.search(r"(?<!not )\bone method\b", text), \
            "docs/studies.md: 'stayed one method': on seeds 9-13 PCGrad and GradVac " \
                                         f"differ by up to {gap[0]:.4f} ({gap[1]}, table.json)"
        assert f"{gap[0]:.4f}" in text, f"docs/studies.md: quote the largest per-seed difference of PCGrad and " \
                                        f"GradVac on seeds 9-13 ({gap[0]:.4f}, {gap[1]})"


def test_a_papers_reported_gain_is_given_with_its_cells():
    """'The paper reports MML ahead of BERT' stands with the cells: the same list item gives Table 1's MML and BERT
    development-set cells for each GLUE task both studies share (rule 7 checks that the cells are the paper's)."""
    for path in (DOCS, RESULTS / "mml_study" / "README.md"):
        for chunk in re.split(r"\n\s*\n|\n(?=- )", path.read_text()):   # the sentence's paragraph or list item
            chunk = " ".join(chunk.split())
            if "reports MML ahead" not in chunk:
                continue
            for task in ("RTE", "MRPC", "STS-B", "CoLA"):
                assert f"row MML against row BERT, development set, {task} column" in chunk, \
                    f"{path.relative_to(REPO)}: '{chunk[:120]}': give the paper's {task} cells beside it"


def test_the_controls_run_times_are_the_records_range():
    """The controls' 'A–B min … a run' is the range of the records' final elapsed_s, and where the charged runs fall
    outside it the sentence gives their range too."""
    def minutes(charged: bool) -> tuple[str, str]:
        e = [max((json.loads(x) for x in f.read_text().splitlines() if x.strip()), key=lambda r: r["epoch"])
             ["elapsed_s"] / 60 for f in (RESULTS / "study_controls" / "runs").glob("*/seed*/metrics.jsonl")
             if charged or "charged" not in str(f)]
        return f"{min(e):.1f}", f"{max(e):.1f}"
    text = " ".join(section(DOCS.read_text(), "### Controls, and a confirmation set").split())
    low, high = minutes(False)
    assert f"{low}–{high} min" in text, f"docs/studies.md, controls: the runs took {low}–{high} min (elapsed_s)"
    all_low, all_high = minutes(True)
    if (all_low, all_high) != (low, high):
        assert f"{all_low}–{all_high}" in text, \
            f"docs/studies.md, controls: with head_pretraining_charged the runs took {all_low}–{all_high} min; say so"
