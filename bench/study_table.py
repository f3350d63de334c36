"""The multitask study's tables: scores per configuration, paired differences with Holm-adjusted p, the plot.

bench.study runs the configurations; this file turns scores[config][seed] into
  table.md / table.json   per configuration: dev SST acc, Quora acc, STS r and overall of the kept model (the
                          final epoch, or the best-epoch one: the study's --select_epoch), mean ± sd over seeds;
                          its paired difference from the baseline on the same seed,
                          mean with a 95% t-interval over seeds, d̄ ± t_{0.975, n−1} · s_d / √n (Student, n − 1
                          degrees of freedom); and, for a configuration with a control (CONTROLS), its paired
                          difference from that control. Below each: the paired t-test's p, Holm-adjusted over
                          the comparisons of its column (bench.seed_statistics.holm), and the verdict at
                          0.05 on the adjusted p, and the exact sign-flip p beside it; below, the |Δ| each row's
                          seeds detect with 80% power. The ensemble (a uniform average of the baseline seeds) is
                          one model: its difference from the members' mean and from the best member, each with a
                          paired bootstrap interval over the dev examples.
  study.png               dev overall per configuration with its 95% interval, and its paired difference from the
                          baseline with its interval (matplotlib optional, as elsewhere).
Left out: simultaneous (adjusted) intervals.
"""

import json
import os
import platform
import shlex

from minbert.core.report import markdown_table, pyplot
from bench.seed_statistics import add_holm, bootstrap_difference, format_bootstrap, format_difference
from bench.seed_statistics import format_holm, format_mean_sd, format_power, mean_sd, paired_difference
from bench.seed_statistics import power_note, sign_flip_note, t_interval

METRICS = ("sst_acc", "para_acc", "sts_pearson", "overall")
# A configuration's control: what it differs from in exactly one respect, so its effect is the
# paired difference from the control, not from the baseline. mnr vs cosine: MNR alone (the same cosine STS head);
# Gradient Compromise vs baseline_accum4: the method at the same 47 updates of 4 batches per epoch; PCGrad and GradVac
# vs baseline_every_task: the same three task batches per update (63 updates per epoch), summed without the surgery.
CONTROLS = {"mnr": "cosine", "grad_compromise": "baseline_accum4", "grad_compromise_normalize": "baseline_accum4",
            "pcgrad": "baseline_every_task", "gradvac": "baseline_every_task"}


def paired(a: dict, b: dict, seeds: list[int], metric: str) -> dict:
    """The paired difference a − b (scores by seed) over the seeds of `seeds` that both ran."""
    both = [s for s in seeds if s in a and s in b]
    return paired_difference([a[s][metric] for s in both], [b[s][metric] for s in both])


def summarise(scores: dict, seeds: list[int], ensemble: dict | None, resampled: dict | None = None) -> dict:
    """scores[config][seed] = {metric: value} -> per config: mean/sd per metric over its seeds (those of `seeds` it
    ran), paired difference from the baseline over the seeds both ran. resampled[config] = {"baseline": [...],
    "control": [...]}: the seed × example bootstrap of its Δ overall (bench.seed_example_bootstrap), kept
    beside that Δ as "seed_example"."""
    out = {}
    for name, by_seed in scores.items():
        row = {"seeds": [s for s in seeds if s in by_seed], "scores": {}, "difference": {}}
        for m in METRICS:
            values = [by_seed[s][m] for s in row["seeds"]]
            mean, sd = mean_sd(values)
            row["scores"][m] = {"mean": mean, "sd": sd, "values": values}
            if name != "baseline" and "baseline" in scores:
                row["difference"][m] = paired(by_seed, scores["baseline"], seeds, m)
        out[name] = row
    for m in METRICS:   # one family per metric: every configuration against the baseline (Holm 1979)
        add_holm([row["difference"].get(m) for row in out.values()])
    for name, control in CONTROLS.items():   # the effect of the one thing a configuration adds to its control
        if name in out and control in out:
            out[name]["control"] = control
            out[name]["difference_vs_control"] = {m: paired(scores[name], scores[control], seeds, m) for m in METRICS}
    for m in METRICS:   # a second family per metric: the configurations against their controls
        add_holm([row["difference_vs_control"][m] for row in out.values() if "control" in row])
    for name, against in (resampled or {}).items():
        for key, which in (("baseline", "difference"), ("control", "difference_vs_control")):
            if key in against and which in out.get(name, {}):
                d = out[name][which]["overall"]
                d["seed_example"] = bootstrap_difference(d["mean"], against[key])
    if ensemble is not None:
        row = {"seeds": seeds,
               "scores": {m: {"mean": ensemble[m], "sd": None, "values": [ensemble[m]]} for m in METRICS},
               "difference": {}}
        if "baseline" in out:
            row["difference"] = {m: {"mean": ensemble[m] - out["baseline"]["scores"][m]["mean"], "low": None,
                                     "high": None,
                                     "values": None, "inside_noise": None} for m in METRICS}
            # Song/Hu/Pan compare their ensemble with their best single model: the member with the highest dev
            # overall (chosen on the same dev set the ensemble is scored on, so this favours the member).
            base = out["baseline"]["scores"]
            best = max(range(len(seeds)), key=lambda i: (base["overall"]["values"][i], -i))
            row["best_member"] = {"seed": seeds[best], **{m: base[m]["values"][best] for m in METRICS}}
            row["difference_vs_best_member"] = {m: ensemble[m] - base[m]["values"][best] for m in METRICS}
            if "bootstrap_overall" in ensemble:   # (R, 1 + K): the ensemble, then each member, on the same resamples
                boot = ensemble["bootstrap_overall"]
                row["bootstrap"] = {
                    "best_member": bootstrap_difference(row["difference_vs_best_member"]["overall"],
                                                        [r[0] - r[1 + best] for r in boot]),
                    "members_mean": bootstrap_difference(row["difference"]["overall"]["mean"],
                                                         [r[0] - sum(r[1:]) / (len(r) - 1) for r in boot])}
        out["ensemble"] = row
    return out


def write_table(out_dir: str, summary: dict, header: dict) -> str:
    rows = []
    for name, row in summary.items():
        cells = {"configuration": name,
                 "n": len(row["seeds"]) if name != "ensemble" else f"1 ({len(row['seeds'])} members)"}
        for m in METRICS:
            s = row["scores"][m]
            cells[m] = format_mean_sd(s["mean"], s["sd"])
        cells["Δ overall vs baseline [95% CI]"] = format_difference(row["difference"].get("overall"))
        for m in METRICS[:3]:
            cells[f"Δ {m}"] = format_difference(row["difference"].get(m))
        rows.append(cells)
    columns = ["configuration", "n", *METRICS, "Δ overall vs baseline [95% CI]", *(f"Δ {m}" for m in METRICS[:3])]
    holm_rows = [{"configuration": name, **{f"Δ {m}": format_holm(row["difference"].get(m)) for m in METRICS}}
                 for name, row in summary.items()
                 if any(row["difference"].get(m, {}).get("p") is not None for m in METRICS)]
    kept = {"best": "the kept (best-epoch) model",
            "last": "the final epoch (fixed in advance)"}[header.get("select_epoch", "best")]
    fewer = header.get("fewer_seeds", {})   # configurations run on the first k seeds only
    md = (f"# Multitask study: dev scores of {kept}, mean ± sd over seeds\n\n"
          f"Budget (every run): `{shlex.join(header['budget'])}`, {header['examples_per_epoch'] or 'one pass of'} "
          f"training examples per epoch; seeds {header['seeds']}"
          + (" (" + ", ".join(f"{n}: the first {k}" for n, k in fewer.items()) + ")" if fewer else "") + ". "
          "Δ: paired difference from the baseline on the same seed, mean [95% t-interval over seeds, n − 1 df]; "
          "\"(noise)\": the interval contains 0. The ensemble is one model, a uniform average of the baseline seeds' "
          "outputs: its Δ here is against the baseline mean, without a seed interval (its bootstrap "
          "intervals are below "
          "the table).\n\n"
          f"Machine: {describe(header['machine'])}.\n\n"
          + markdown_table(rows, columns) + "\n")
    ens = summary.get("ensemble", {})
    if "best_member" in ens:
        vs_mean, vs_best, best = ens["difference"], ens["difference_vs_best_member"], ens["best_member"]
        md += ("\nUniform seed average against its members: dev overall "
               f"{ens['scores']['overall']['mean']:.4f}; {vs_mean['overall']['mean']:+.4f} against the members' mean "
               f"({summary['baseline']['scores']['overall']['mean']:.4f}); {vs_best['overall']:+.4f} "
               "against the best member "
               f"(seed {best['seed']}, {best['overall']:.4f}, picked by the same dev set), per task "
               + ", ".join(f"{m} {vs_best[m]:+.4f}" for m in METRICS[:3]) + ".\n")
        if "bootstrap" in ens:
            b = ens["bootstrap"]
            md += ("\nPaired bootstrap over the dev examples (each task's dev set resampled with replacement, "
                   f"{b['best_member']['resamples']} resamples, the same resample for the average and every member; "
                   "percentile 95% interval and two-sided bootstrap p): dev overall "
                   + "; ".join(f"{b[k]['mean']:+.4f} {format_bootstrap(b[k], ' (no resample ≤ 0)')} against {what}"
                               for k, what in (("members_mean", "the members' mean"),
                                               ("best_member", f"the best member (seed {best['seed']})")))
                   + ". It covers the dev sample only: not a new draw of seeds, and not the choice "
                     "of the best member on "
                   "this same dev set.\n")
    if holm_rows:
        family = sum(1 for r in holm_rows if r["Δ overall"] != "–")
        md += ("\n## Multiplicity: Holm-adjusted p of each Δ above\n\n"
               f"Paired t-test over seeds (two-sided), Holm-adjusted over the {family} configurations of each column "
               "(one family per metric, all against the same baseline). Cell: adjusted p, the verdict at 0.05 on it "
               "(higher / lower than the baseline, or noise), then the unadjusted p. Read verdicts from this table: "
               "the intervals above are unadjusted, so with many configurations some exclude 0 by chance. "
               + sign_flip_note(min(len(r["seeds"]) for r in summary.values())) + "\n\n"
               + markdown_table(holm_rows, ["configuration", *(f"Δ {m}" for m in METRICS)]) + "\n")
        n = len(header["seeds"])   # the caption's; each cell is at its own row's n (the seeds its differences pair)
        power_rows = [{"configuration": name,
                       **{f"Δ {m}": format_power(row["difference"].get(m), len(row["difference"][m]["values"]), family)
                                                 for m in METRICS}}
                      for name, row in summary.items() if row["difference"].get("overall", {}).get("p") is not None]
        md += ("\n## Power: the |Δ| these seeds could detect\n\n" + power_note(n, family)
               + (" Rows with fewer seeds: at their own n." if fewer else "")
               + " Cell: at 0.05 / at "
               f"0.05/{family}.\n\n" + markdown_table(power_rows, ["configuration", *(f"Δ {m}" for m in METRICS)])
               + "\n")
    booted = {name: row for name, row in summary.items() if "seed_example" in row["difference"].get("overall", {})}
    if booted:
        first = next(iter(booted.values()))["difference"]["overall"]["seed_example"]
        cell = lambda d: "–" if not d or "seed_example" not in d else format_bootstrap(d["seed_example"])
        md += ("\n## Δ overall with the dev sets resampled too\n\nThe intervals above are over "
               "seeds only (unit: seeds, "
               "the dev sets held fixed). Here each of "
               f"{first['resamples']} resamples draws the paired seeds with replacement and each "
               "task's dev examples with "
               "replacement (the same examples for every seed and both configurations), rescores every run from its "
               "outputs.pt and averages the paired differences (bench/seed_example_bootstrap.py): percentile "
               "95% interval and two-sided bootstrap p, whose floor is 2/resamples (unit: seeds and dev "
               "examples together). "
               "Resampling n seeds understates their spread where n is small (no Student correction: 3 seeds allow 10 "
               "distinct draws), so this interval can be narrower than the t-interval: it adds the "
               "dev sets' sampling to "
               "the seeds', it does not replace the seed interval. Verdicts stay with the Holm table.\n\n"
               + markdown_table([{"configuration": name,
                                  "Δ overall [95%, seeds]": format_difference(row["difference"]["overall"]),
                                  "[95%, seeds × examples]": cell(row["difference"]["overall"]),
                                  "vs its control [95%, seeds]": format_difference(row.get("difference_vs_control",
                                                                                           {}).get("overall")),
                                  "vs its control [95%, seeds × examples]": cell(row.get("difference_vs_control",
                                                                                         {}).get("overall"))}
                                 for name, row in booted.items()],
                                ["configuration", "Δ overall [95%, seeds]", "[95%, seeds × examples]",
                                 "vs its control [95%, seeds]", "vs its control [95%, seeds × examples]"]) + "\n")
    controlled = {name: row for name, row in summary.items() if "control" in row}
    order = ("overall", *METRICS[:3])
    if controlled:
        md += (f"\n## Against its control\n\nEach configuration against the one that differs from it in one respect "
               f"(CONTROLS), paired by seed: Δ [95% t-interval], then the Holm-adjusted p over the {len(controlled)} "
               "comparisons of each column, its verdict at 0.05, the unadjusted p and the sign-flip p (as above); then "
               f"the |Δ| detectable with 80% power at 0.05 / at 0.05/{len(controlled)}.\n\n"
               + markdown_table([{"configuration": name, "control": row["control"],
                                  **{f"Δ {m}": format_difference(row["difference_vs_control"][m]) for m in order}}
                                 for name, row in controlled.items()],
                                ["configuration", "control", *(f"Δ {m}" for m in order)])
               + "\n\n" + markdown_table([{"configuration": name,
                                           **{f"Holm p, Δ {m}": format_holm(row["difference_vs_control"][m])
                                                                       for m in order}} for name,
                                          row in controlled.items()],
                                         ["configuration", *(f"Holm p, Δ {m}" for m in order)])
               + "\n\n" + markdown_table([{"configuration": name, **{f"80% power, Δ {m}": format_power(
                   row["difference_vs_control"][m], len(row["difference_vs_control"][m]["values"]), len(controlled))
                                                                     for m in order}}
                   for name, row in controlled.items()], ["configuration", *(f"80% power, Δ {m}" for m in order)])
               + "\n")
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(md)
    with open(os.path.join(out_dir, "table.json"), "w") as f:
        json.dump({**header, "configurations": summary}, f, indent=1)
    return md


def plot(path: str, summary: dict) -> bool:
    """Two panels: dev overall per configuration (mean, 95% t-interval of the mean over seeds), and its paired
    difference from the baseline (mean, 95% t-interval). The ensemble, one model, is a point without interval."""
    plt = pyplot(path)   # None (and a note) without matplotlib
    if plt is None:
        return False
    names = list(summary)
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.4 * len(names) + 1.8), sharey=True)

    def point(ax, i, mean, lo, hi):
        if lo is not None and lo == lo:   # not None, not nan
            ax.errorbar(mean, i, xerr=[[mean - lo], [hi - mean]], fmt="o", capsize=3, color="C0")
        else:
            ax.plot(mean, i, "s", color="C1")

    for i, name in enumerate(names):
        values = summary[name]["scores"]["overall"]["values"]
        mean, lo, hi = t_interval(values) if len(values) > 1 else (values[0], None, None)
        point(axes[0], i, mean, lo, hi)
        d = summary[name]["difference"].get("overall")
        if d:
            point(axes[1], i, d["mean"], d["low"], d["high"])
    axes[0].set_yticks(range(len(names)), names)
    axes[0].set(xlabel="dev overall (mean, 95% t-interval over seeds)", title="Dev overall per configuration")
    axes[1].axvline(0, color="grey", lw=1)
    axes[1].set(xlabel="dev overall − baseline (paired by seed, 95% t-interval)", title="Difference from the baseline")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def machine() -> dict:
    import torch
    from minbert.core.device import cpu_has_native_bf16
    cpu, ids = platform.processor() or platform.machine(), {}
    try:   # the first processor's name, and its family and model: what tells two CPUs of one name apart
        with open("/proc/cpuinfo") as f:
            fields = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        cpu = fields.get("model name", cpu)
        ids = {key: int(fields[name]) for key, name in (("cpu_family", "cpu family"), ("cpu_model", "model"))
               if fields.get(name, "").isdigit()}
    except OSError:
        pass
    return {"cpu": cpu, **ids, "cpus": os.cpu_count(), "native_bf16": cpu_has_native_bf16(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none",
            "torch": torch.__version__, "python": platform.python_version(),
            "load": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None}


def describe(m: dict) -> str:
    """machine() in one line: "AMD EPYC family 25 model 17 (2 CPUs, native bf16: True, GPU: none), load [0.3, 0.5,
    0.8]" (family and model where the record has them: the records of studies before they were recorded do not)."""
    ids = f" family {m['cpu_family']} model {m['cpu_model']}" if "cpu_model" in m and "cpu_family" in m else ""
    return f"{m['cpu']}{ids} ({m['cpus']} CPUs, native bf16: {m['native_bf16']}, GPU: {m['gpu']}), load {m['load']}"


