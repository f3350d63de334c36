"""minbert/run/distributed.py: two CPU processes (gloo) take the step one process takes on both batches.

Oracle (b): the same step in a single process on the concatenated 2b batch (dropout off), run
through the very same code, where every minbert.run.distributed helper is the identity. Each of the
2 ranks trains on its half of a global batch of 2b = 6 rows (distributed.shard_batch); the
gradients must equal the single-process ones to 1e-5, for: one task; all three tasks in one
backward (heterogeneous batches); two micro-batches of different tasks (gradient accumulation,
no_sync); PCGrad; GradVac; and 4 MML steps with elimination (same heads eliminated, same moving
averages). The optimizer is SGD, so equal gradients give equal steps; AdamW sees the same
gradients. The processes are started like torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR
= 127.0.0.1, a free port), once for all scenarios to keep the test time small.
Both scripts also run under 2 processes (property (c)): they finish, rank 1 writes no file, and a
run interrupted by Ctrl-C on both ranks and resumed ends with the uninterrupted 2-process run's
scores and bit-identical weights (train_multitask and train_mml, dropout on).
Run: python -m pytest -q tests/run/test_distributed.py   (offline, CPU, ~40 s on 2 cores)
The tests that start the 2 processes are marked slow: each launch is one wait of 40-80 s without output on a busy
2-core machine (two fresh interpreters importing torch, gloo, then the runs), over the quick suite's 30 s; a plain
`python -m pytest -q` (CI) runs them. The sharding and the one-GPU refusal stay in the quick suite.
"""

import contextlib
import math
import os
import signal
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from minbert.run import distributed
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.methods.gradvac import GradVac
from minbert.methods.mml import LAMBDA, HeadEliminator, MultiverseHeads
from minbert.methods.pcgrad import PCGrad
from minbert.tasks.multitask import TASKS, MultitaskBert, task_loss
from conftest import save_tiny_model, write_glue, write_task_files

WORLD = 2
CPU = torch.device("cpu")
# scenario -> the tasks of each micro-batch of one optimizer step
SCENARIOS = {"one task": [["sst"]], "heterogeneous": [list(TASKS)], "grad_accum": [["sst"], ["para"]],
             "pcgrad": [list(TASKS)], "gradvac": [list(TASKS)]}


# ---------------------------------------------------------------------------- launching like torchrun
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, fn, args):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)   # 2 processes on a few shared cores
    distributed.setup("cpu")
    try:
        fn(rank, *args)
    finally:
        distributed.barrier()
        dist.destroy_process_group()


def launch(fn, *args, world=WORLD):
    """fn(rank, *args) in `world` processes with torchrun's environment variables (gloo, loopback)."""
    mp.spawn(_worker, args=(world, free_port(), fn, args), nprocs=world, join=True)


# ---------------------------------------------------------------------------- one step, any world size
def make_batch(task, seed, B=2 * 3, T=10):
    """A global batch of B rows with ragged lengths (padding to trim) and labels for `task`."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None] < lengths[:, None]).long()                    # (B, T)
    labels = {"sst": torch.randint(0, 5, (B,), generator=g), "para": torch.randint(0, 2, (B,), generator=g).float(),
              "sts": torch.rand(B, generator=g) * 5}[task]
    return {"input_ids": torch.randint(1000, 3000, (B, T), generator=g) * mask, "attention_mask": mask,
            "token_type_ids": (torch.arange(T) >= 5).long().expand(B, T) * mask, "labels": labels,
            "ids": [f"{task}{i}" for i in range(B)], "index": torch.arange(B)}


def local(batch, rank):
    return batch if rank is None else distributed.shard_batch(batch, rank, WORLD)


def tiny_encoder():
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def multitask_step(name, rank):
    """One optimizer step of `name`; rank None = single process on the global batches."""
    model = MultitaskBert(tiny_encoder(), dropout=0.0, pooling="mean").train()
    sync = distributed.Sync(model, CPU)
    params = [p for p in model.parameters() if p.requires_grad]
    surgery = {"pcgrad": PCGrad(params, seed=5), "gradvac": GradVac(params, seed=5, beta=0.5)}.get(name)
    if name == "gradvac":
        surgery._allocate(len(TASKS))
        surgery.targets.fill_(0.3)   # a non-zero target, so GradVac differs from PCGrad
    micro = SCENARIOS[name]
    for m, tasks in enumerate(micro):
        losses = {}
        for i, t in enumerate(tasks):
            batch = local(make_batch(t, seed=10 * m + i), rank)
            losses[t] = task_loss(t, model(t, batch), batch["labels"])
        if surgery:
            with sync.no_sync():
                surgery.accumulate([losses.get(t) for t in TASKS])
        else:
            sync.before_backward(sum(losses.values()) / len(micro), last=m == len(micro) - 1).backward()
    if surgery:
        sync.task_grads(surgery)
        surgery.apply()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    torch.optim.SGD(params, lr=0.1).step()
    return {"grads": grads, "params": {n: p.detach().clone() for n, p in model.named_parameters()}}


def mml_steps(rank, steps=4):
    """4 MML steps (M = 8 heads, penalty, elimination every 2 steps) on the global batches."""
    encoder = tiny_encoder()
    heads = MultiverseHeads(32, 2, 8)
    model = torch.nn.ModuleDict({"encoder": encoder, "heads": heads})
    model["eliminator"] = eliminator = HeadEliminator(heads, every=2, min_bandwidth=1e-4)
    sync = distributed.Sync(model, CPU)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(1, steps + 1):
        batch = local(make_batch("para", seed=100 + step), rank)
        d = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
        loss, per_head = heads.task_loss(heads(d), batch["labels"].long())
        sync.before_backward(loss + LAMBDA * heads.multiverse_loss()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        eliminator.observe(distributed.mean_over_ranks(per_head))   # every rank: the global batch's ℓ_j
        eliminator.maybe_eliminate(step)
    return {"active": heads.active.clone(), "moving_avg": eliminator.moving_avg.clone(),
            "params": {n: p.detach().clone() for n, p in model.named_parameters()}}


def all_scenarios(rank, out_dir):
    results = {name: multitask_step(name, rank) for name in SCENARIOS}
    results["mml"] = mml_steps(rank)
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp")
    launch(all_scenarios, str(out))
    ranks = [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]
    single = {name: multitask_step(name, None) for name in SCENARIOS}
    single["mml"] = mml_steps(None)
    return ranks, single


def close(got, want, where, atol=1e-5):
    assert got.keys() == want.keys(), f"{where}: tensors {sorted(got)} vs {sorted(want)}"
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=atol, rtol=1e-5, msg=lambda m: f"{where} [{k}]: {m}")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_ddp_step_equals_single_process_step_on_concatenated_batch(runs, name):
    ranks, single = runs
    where = {"pcgrad": "minbert.run.distributed.Sync.task_grads + PCGrad.apply", "gradvac": "minbert.run.distributed.Sync.task_grads + GradVac.apply",
             }.get(name, "minbert.run.distributed.Sync.before_backward")
    for r, result in enumerate(ranks):
        close(result[name]["grads"], single[name]["grads"], f"{where} ({name}, rank {r}): DDP gradient vs 1-process on 2b")
        close(result[name]["params"], single[name]["params"], f"{where} ({name}, rank {r}): weights after the step")


@pytest.mark.slow
def test_ddp_mml_ranks_eliminate_the_same_heads_as_one_process(runs):
    ranks, single = runs
    want = single["mml"]
    assert not bool(want["active"].all()), "test fixture: the single-process MML run should eliminate some heads"
    for r, result in enumerate(ranks):
        where = f"minbert.run.distributed.mean_over_ranks + HeadEliminator (rank {r})"
        assert torch.equal(result["mml"]["active"], want["active"]), \
            f"{where}: active heads {result['mml']['active'].tolist()} vs 1-process {want['active'].tolist()}"
        torch.testing.assert_close(result["mml"]["moving_avg"], want["moving_avg"], atol=1e-5, rtol=1e-5,
                                   msg=lambda m: f"{where}: moving averages differ: {m}")
        close(result["mml"]["params"], want["params"], f"{where}: weights after 4 steps", atol=1e-5)


def test_shard_batch_splits_rows_and_trims_padding():
    """Property: the shards hold disjoint rows covering the batch, each trimmed to its longest row."""
    batch = make_batch("sts", seed=1, B=5)
    shards = [distributed.shard_batch(batch, r, 2) for r in range(2)]
    assert sorted(sum((s["ids"] for s in shards), [])) == sorted(batch["ids"]), "minbert.run.distributed.shard_batch: rows lost or repeated"
    for r, s in enumerate(shards):
        rows = list(range(r, 5, 2))
        T = int(batch["attention_mask"][rows].sum(1).max())
        assert torch.equal(s["input_ids"], batch["input_ids"][rows, :T]), f"minbert.run.distributed.shard_batch: rank {r} rows/trim wrong"
        assert torch.equal(s["labels"], batch["labels"][rows]), f"minbert.run.distributed.shard_batch: rank {r} labels wrong"


# ---------------------------------------------------------------------------- both scripts under 2 processes
@contextlib.contextmanager
def counting_all_reduces():
    """Yields a list that gets, for every backward pass (Tensor.backward: the scripts' loops call it once per
    micro-batch; SMART's inner step uses autograd.grad), how many gradient buckets DDP all-reduced during it (a
    communication hook around DDP's own all-reduce counts them)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    count, per_backward = [0], []
    real_init, real_backward = distributed.Sync.__init__, torch.Tensor.backward

    def hook(state, bucket):
        count[0] += 1
        return default_hooks.allreduce_hook(state, bucket)

    def init(self, *a, **k):
        real_init(self, *a, **k)
        if self.ddp is not None:
            self.ddp.register_comm_hook(None, hook)

    def backward(self, *a, **k):
        before = count[0]
        real_backward(self, *a, **k)
        per_backward.append(count[0] - before)

    distributed.Sync.__init__, torch.Tensor.backward = init, backward
    try:
        yield per_backward
    finally:
        distributed.Sync.__init__, torch.Tensor.backward = real_init, real_backward


def script_runs(rank, root):
    """Each rank runs the scripts as torchrun would start them (same argv except per-rank output
    folders for the smoke runs, so files written by rank 1 would be seen), then the resume check."""
    import train_mml
    import train_multitask
    from test_train_mml import run as run_mml
    from test_train_multitask import run as run_multitask
    paths = {"multitask": (root / "cs224n", root / "model"), "mml": (root / "glue", root / "model")}
    histories = {}
    # smoke: --surgery pcgrad and MML with elimination, one epoch each, per-rank output folders
    histories["multitask"] = run_multitask(paths["multitask"], root / f"mt-rank{rank}", "--epochs", "1", "--surgery", "pcgrad")
    histories["mml"] = run_mml(paths["mml"], root / f"mml-rank{rank}", "--epochs", "1", "--heads", "8", "--eliminate_every", "2")
    # every other method flag under DDP: SMART + PALs + heterogeneous batches + accumulation; R3F + GradVac
    with counting_all_reduces() as per_backward:   # which backward passes of --grad_accum 2 average the gradients
        histories["methods"] = [
            run_multitask(paths["multitask"], root / "methods1", "--epochs", "1", "--limit", "8", "--smart", "1",
                          "--pals", "--pals_size", "8", "--pals_heads", "2", "--heterogeneous", "--grad_accum", "2")]
    histories["all_reduces_per_backward"] = per_backward
    histories["methods"] += [
        run_multitask(paths["multitask"], root / "methods2", "--epochs", "1", "--limit", "8", "--r3f", "1", "--surgery", "gradvac",
                      "--scale_losses")]
    # resume: full run; run cut by a Ctrl-C on both ranks at the same step; resumed run (shared folders)
    histories["full"] = run_multitask(paths["multitask"], root / "full")
    real_loss, calls = train_multitask.task_loss, {"n": 0}

    def interrupt_on_call_12(*a):
        calls["n"] += 1
        if calls["n"] == 12:   # epoch 2, step 3 (9 steps per epoch: 24 + 24 + 24 rows, global batch 8)
            os.kill(os.getpid(), signal.SIGINT)   # a real Ctrl-C: handled at the next step boundary
        return real_loss(*a)

    train_multitask.task_loss = interrupt_on_call_12
    try:
        run_multitask(paths["multitask"], root / "cut")
    except SystemExit as e:
        histories["cut_exit"] = e.code
    train_multitask.task_loss = real_loss
    histories["resumed"] = run_multitask(paths["multitask"], root / "cut", "--resume", str(root / "cut" / "run" / "interrupted.pt"))
    # the same for train_mml (elimination every 2 steps): Ctrl-C at epoch 2, step 1 on both ranks
    extra = ("--heads", "8", "--eliminate_every", "2", "--min_bandwidth", "0.001")
    histories["mml_full"] = run_mml(paths["mml"], root / "mml_full", *extra)
    real_to_device, calls = train_mml.to_device, {"n": 0}

    def interrupt_at_epoch_2_step_1(*a):
        calls["n"] += 1   # 3 training batches per epoch; rank 0 alone also fetches 1 dev batch
        if calls["n"] == (6 if rank == 0 else 5):
            os.kill(os.getpid(), signal.SIGINT)   # a real Ctrl-C: handled at the next step boundary
        return real_to_device(*a)

    train_mml.to_device = interrupt_at_epoch_2_step_1
    try:
        run_mml(paths["mml"], root / "mml_cut", *extra)
    except SystemExit as e:
        histories["mml_cut_exit"] = e.code
    train_mml.to_device = real_to_device
    histories["mml_resumed"] = run_mml(paths["mml"], root / "mml_cut", *extra, "--resume", str(root / "mml_cut" / "interrupted.pt"))
    torch.save(histories, root / f"histories{rank}.pt")


@pytest.fixture(scope="module")
def script_histories(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp_scripts")
    (root / "cs224n").mkdir()
    write_task_files(root / "cs224n")
    write_glue(root / "glue")
    save_tiny_model(root / "model")
    launch(script_runs, root)
    return root, [torch.load(root / f"histories{r}.pt", weights_only=False) for r in range(WORLD)]


def files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_ddp_scripts_finish_and_only_rank_0_writes_files(script_histories):
    root, histories = script_histories
    for script, folder, names in (("train_multitask", "mt-rank{}", ["run/best.pt", "run/last.pt", "run/metrics.jsonl"]),
                                  ("train_mml", "mml-rank{}", ["best.pt", "last.pt", "metrics.jsonl"])):
        written = files(root / folder.format(0))
        assert all(n in written for n in names), f"{script} under 2 processes: rank 0 wrote {written}, expected {names}"
        assert files(root / folder.format(1)) == [], f"{script}: rank 1 wrote {files(root / folder.format(1))}; only rank 0 may write"
    for r in range(WORLD):
        assert [h["epoch"] for h in histories[r]["multitask"]] == [1], f"train_multitask rank {r}: history {histories[r]['multitask']}"
        assert [h["epoch"] for h in histories[r]["mml"]] == [1], f"train_mml rank {r}: history {histories[r]['mml']}"
        for h in histories[r]["methods"]:   # SMART, PALs, heterogeneous, grad_accum, R3F, GradVac, loss scaling
            assert len(h) == 1 and math.isfinite(h[0]["overall"]), f"train_multitask rank {r}: method run history {h}"


@pytest.mark.slow
def test_ddp_grad_accum_averages_the_gradients_once_at_the_last_micro_batch(script_histories):
    """train_multitask.py --grad_accum 2 under 2 processes: the first micro-batch's backward accumulates locally
    (DDP's no_sync), and only the second, last one all-reduces, so each update communicates once. Averaging at every
    micro-batch gives the same mean gradient, so only the count of DDP's all-reduces shows it."""
    _, histories = script_histories
    for r in range(WORLD):
        got = histories[r]["all_reduces_per_backward"]
        assert got and len(got) % 2 == 0, f"rank {r}: expected an even number of backward passes, got {got}"
        assert all(n == 0 for n in got[0::2]) and all(n > 0 for n in got[1::2]), (
            f"train_multitask.py --grad_accum 2, rank {r}: DDP all-reduced {got} gradient buckets per backward pass; "
            f"expected none in each first micro-batch (no_sync) and some in each last one "
            f"(minbert.run.distributed.Sync.before_backward(loss, last=...))")


@pytest.mark.slow
def test_ddp_resume_after_interrupt_equals_uninterrupted_2_process_run(script_histories):
    root, histories = script_histories
    h = histories[0]
    assert h["cut_exit"] == 130, f"train_multitask under 2 processes: a Ctrl-C should exit 130, got {h.get('cut_exit')}"
    keys = ("sst_acc", "para_acc", "sts_pearson", "overall")   # the epoch's loss means restart at a resume, as in 1 process
    got, want = [h["resumed"][-1][k] for k in keys], [h["full"][-1][k] for k in keys]
    full, cut = (torch.load(root / name / "run" / "last.pt", weights_only=True)["model"] for name in ("full", "cut"))
    for k in full:
        assert torch.equal(full[k], cut[k]), f"train_multitask 2-process resume: final weight {k} differs from the uninterrupted run's"
    assert h["mml_cut_exit"] == 130, f"train_mml under 2 processes: a Ctrl-C should exit 130, got {h.get('mml_cut_exit')}"
    strip = [{k: v for k, v in r.items() if k not in ("elapsed_s", "train_examples_per_s")} for r in h["mml_resumed"]]
    mml_want = [{k: v for k, v in r.items() if k not in ("elapsed_s", "train_examples_per_s")} for r in h["mml_full"]]
    assert strip == mml_want, f"train_mml 2-process resume: records {strip} differ from the uninterrupted run's {mml_want}"
    full, cut = (torch.load(root / name / "last.pt", weights_only=True)["model"] for name in ("mml_full", "mml_cut"))
    assert all(torch.equal(full[k], cut[k]) for k in full), "train_mml 2-process resume: final weights/β/moving averages differ"
    assert got == want, f"train_multitask 2-process resume: final record {got} differs from the uninterrupted run's {want}"


def test_more_processes_than_gpus_is_one_clear_error_on_every_rank(monkeypatch):
    """torchrun --nproc_per_node 2 on a one-GPU machine: rank 1 has no GPU of its own. Each rank must stop with the
    fix (--nproc_per_node 1 or --device cpu) before joining the process group, where rank 0 would otherwise wait for
    rank 1 until the group's timeout (seen: an hour-long hang on an H100)."""
    from minbert.core.errors import UserError
    monkeypatch.setattr(distributed, "pick_device", lambda name: torch.device("cuda"))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(distributed, "active", lambda: pytest.fail("joined the process group before checking the GPUs"))
    for rank in ("0", "1"):
        for k, v in {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "RANK": rank, "LOCAL_RANK": rank}.items():
            monkeypatch.setenv(k, v)
        with pytest.raises(UserError, match=r"2 processes on this machine but it has 1 GPU.*--nproc_per_node 1"):
            distributed.setup("auto")

