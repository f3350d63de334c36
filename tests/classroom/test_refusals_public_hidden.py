"""A refusal the runtime fence makes shows on public cases whenever it would on hidden ones: a student reads their
refusals before the due date, never only after it.

For every variant of the honest corpus (tests/classroom/honest/) and for honest variants with one off-list call
planted in place of one of theirs (reached on every case, or only on a branch the cases' inputs choose), graded with
the gate reading nothing (`without_gate`, so the runtime fence is what refuses): per assignment, every refusal read
in a hidden case (results.json's visibility "after_due_date") is read in some public case ("visible") too. A
refusal in public cases alone is allowed: the student sees it before the due date. Oracle: the fence's own line,
"called NAME at FILE:LINE, which assignment KEY does not allow", and the call planted.
"""

from pathlib import Path

import pytest
from classroom_helpers import grade, student, submission, without_gate  # noqa: F401
from test_gate import honest_corpus

from minbert.classroom import assignments as classroom
from minbert.classroom import autograder
from minbert.classroom.assignments import package_file
from minbert.classroom.submission import graded_files

SDPA = "F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"
CDIST = " + 0.0 * torch.cdist({0}, {0}).sum()"
# name: (the honest variant, the call it writes, the off-list call planted in its place, the name refused)
PLANTED = {
    "surgery: torch.cdist for the dot": ("surgery_pcgrad_dot", "torch.dot(coef[i], gram[:, j])",
                                         "torch.cdist(coef[i][None], gram[:, j][None])[0, 0]", "torch.cdist"),
    "attention: F.scaled_dot_product_attention for the last matmul": (
        "attention_hf_style", "torch.matmul(attention_probs, v)", SDPA, "scaled_dot_product_attention"),
    "adamw: torch.cdist inside `if wd > 0.0`": ("adamw_inplace_sqrt", "p.mul_(1.0 - lr * wd)",
                                               ("p.mul_(1.0 - lr * wd + (0.0 * torch.cdist(p.reshape(1, -1), "
                                                "p.reshape(1, -1)).sum()).item())"), "torch.cdist"),
    "mml: torch.cdist inside `if` both heads are active": ("mml_loss_pair_loop", "(w[r] * w[s]).sum(-1).abs().sum()",
                                                           "(w[r] * w[s]).sum(-1).abs().sum()" + CDIST.format("w[r]"),
                                                           "torch.cdist"),
}
# The same, in functions that only hidden cases call (cases.py draws the public cases from the first function alone)
PLANTED_IN_HIDDEN_ONLY_FUNCTIONS = {
    "surgery: torch.cdist in GradVac": ("surgery_gradvac_named", "float((ci * gram[:, j]).sum())",
                                        "float((ci * gram[:, j]).sum()" + CDIST.format("gram") + ")", "torch.cdist"),
    "mml: torch.cdist in observe": ("mml_observe_masked", "new = loss.clone()",
                                    "new = loss.clone()" + CDIST.format("loss[None]"), "torch.cdist"),
}


def variants(planted: dict, honest=True) -> list:
    """[(name, key, file, nth, body, the name planted or None)]: the honest corpus (if `honest`), then `planted`."""
    corpus = {name: (key, file, nth, body) for name, key, file, nth, body in honest_corpus()}
    found = [(name, *v, None) for name, v in corpus.items()] if honest else []
    for name, (variant, call, replacement, refused) in planted.items():
        key, file, nth, body = corpus[variant]
        assert body.count(call) == 1, f"tests/classroom/honest/{variant}.py no longer writes `{call}` once"
        found.append((name, key, file, nth, body.replace(call, replacement), refused))
    return found


def rounds(found: list) -> list:
    """Variants grouped so that a round holds at most one variant of each assignment (one grade per round)."""
    out = []
    for v in found:
        free = next((r for r in out if v[1] not in {w[1] for w in r}), None)
        if free is None:
            out.append(free := [])
        free.append(v)
    return out


def refusals(entries, key: str, visibility: str) -> set:
    """The fence's refusals in `key`'s cases of one visibility: the name each line quotes, and where."""
    return {e["output"].split(", which assignment")[0] for e in entries if e["assignment"] == key and
            e["visibility"] == visibility and e["output"].startswith("called ")}


def hidden_only_refusals(copy, tmp_path, found: list) -> tuple[list, list]:
    """Grade `found` in rounds: (per variant, the refusals hidden cases read and no public case does; the planted
    calls the fence refused in no case)."""
    wrong, missed = [], []
    for i, group in enumerate(rounds(found)):
        keys = {key for _, key, *_ in group}
        restore = sorted({Path(rel).name for rel in graded_files(keys)})       # every other block: the reference
        sub = submission(copy, tmp_path / str(i), restore=restore)
        for name, key, file, nth, body, _ in group:
            autograder._replace_block(sub / package_file(Path(file).name), key, body.strip("\n"), nth=nth)
        got = grade(sub, keys, salt=11)
        for name, key, file, nth, body, planted in group:
            public, hidden = refusals(got, key, "visible"), refusals(got, key, "after_due_date")
            if hidden - public:
                wrong.append(f"{name} ({key}): hidden cases refuse {sorted(hidden - public)}, no public case does "
                             f"(public: {sorted(public) or 'nothing'})")
            if planted and not any(planted in line for line in public | hidden):
                missed.append(f"{name}: the fence refused no call named {planted} ({sorted(public | hidden)})")
    return wrong, missed


@pytest.mark.slow
def test_public_cases_show_every_refusal_hidden_cases_would(student, tmp_path, without_gate):  # noqa: F811
    found = variants(PLANTED)
    assert len(found) >= 40 + len(PLANTED) and {v[1] for v in found} == set(classroom.BY_KEY)
    wrong, missed = hidden_only_refusals(student, tmp_path, found)
    assert not wrong, "a refusal shows only after the due date:\n" + "\n".join(wrong)
    assert not missed, "a planted off-list call was not refused by the fence:\n" + "\n".join(missed)


@pytest.mark.slow
def test_public_cases_show_refusals_in_every_function(student, tmp_path, without_gate):  # noqa: F811
    wrong, missed = hidden_only_refusals(student, tmp_path, variants(PLANTED_IN_HIDDEN_ONLY_FUNCTIONS, honest=False))
    assert not missed, "a planted off-list call was not refused by the fence:\n" + "\n".join(missed)
    assert not wrong, "a refusal shows only after the due date:\n" + "\n".join(wrong)
