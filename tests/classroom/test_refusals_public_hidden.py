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
from classroom_helpers import grade, honest_corpus, lay, rounds, student, submission, without_gate  # noqa: F401

from minbert.classroom import assignments as classroom
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
    """[(Variant, the name planted or None)]: the honest corpus (if `honest`), then `planted`."""
    corpus = {v.name: v for v in honest_corpus()}
    found = [(v, None) for v in corpus.values()] if honest else []
    for name, (variant, call, replacement, refused) in planted.items():
        v = corpus[variant]
        assert v.body.count(call) == 1, f"tests/classroom/honest/{variant}.py no longer writes `{call}` once"
        found.append((v._replace(name=name, body=v.body.replace(call, replacement)), refused))
    return found


def refusals(entries, key: str, visibility: str) -> set:
    """The fence's refusals in `key`'s cases of one visibility: the name each line quotes, and where."""
    return {e["output"].split(", which assignment")[0] for e in entries if e["assignment"] == key and
            e["visibility"] == visibility and e["output"].startswith("called ")}


def hidden_only_refusals(copy, tmp_path, found: list) -> tuple[list, list]:
    """Grade `found` in rounds: (per variant, the refusals hidden cases read and no public case does; the planted
    calls the fence refused in no case)."""
    wrong, missed, planted = [], [], {v.name: p for v, p in found}
    for i, group in enumerate(rounds([v for v, _ in found])):
        keys = {v.key for v in group}
        restore = sorted({Path(rel).name for rel in graded_files(keys)})       # every other block: the reference
        sub = submission(copy, tmp_path / str(i), restore=restore)
        for v in group:
            lay(sub / package_file(Path(v.file).name), v)
        got = grade(sub, keys, salt=11)
        for v in group:
            public, hidden = refusals(got, v.key, "visible"), refusals(got, v.key, "after_due_date")
            if hidden - public:
                wrong.append(f"{v.name} ({v.key}): hidden cases refuse {sorted(hidden - public)}, no public case does "
                             f"(public: {sorted(public) or 'nothing'})")
            name = planted[v.name]
            if name and not any(name in line for line in public | hidden):
                missed.append(f"{v.name}: the fence refused no call named {name} ({sorted(public | hidden)})")
    return wrong, missed


@pytest.mark.slow
def test_public_cases_show_every_refusal_hidden_cases_would(student, tmp_path, without_gate):  # noqa: F811
    found = variants(PLANTED)
    assert len(found) >= 40 + len(PLANTED) and {v.key for v, _ in found} == set(classroom.BY_KEY)
    wrong, missed = hidden_only_refusals(student, tmp_path, found)
    assert not wrong, "a refusal shows only after the due date:\n" + "\n".join(wrong)
    assert not missed, "a planted off-list call was not refused by the fence:\n" + "\n".join(missed)


@pytest.mark.slow
def test_public_cases_show_refusals_in_every_function(student, tmp_path, without_gate):  # noqa: F811
    wrong, missed = hidden_only_refusals(student, tmp_path, variants(PLANTED_IN_HIDDEN_ONLY_FUNCTIONS, honest=False))
    assert not missed, "a planted off-list call was not refused by the fence:\n" + "\n".join(missed)
    assert not wrong, "a refusal shows only after the due date:\n" + "\n".join(wrong)
