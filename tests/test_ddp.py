"""DDP under torchrun on the CPU (gloo): real two-process runs of the harness (the slowest
rank's time, every rank's parameters against eager's), the all-reduce-outside helper's
average against DDP's own, and the DDP rewrites run to the end of the script. What needs
CUDA (captures, NCCL in a graph) is in bench/gpu_ddp.sh."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from advisor.cli import cli
from advisor.errors import CgAdviseError
from advisor.profile import PACKAGE_PARENT, parse_target, split_launcher
from conftest import ROOT
from tuner.harness import Settings
from tuner.patch import DDP_GRAPH_SCOPES, make_patch
from tuner.runner import new_workdir, run_candidate

TORCHRUN = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
SCRIPT = ROOT / "tests" / "scripts" / "ddp_cpu.py"
SMALL = Settings(warmup=2, iterations=6, repeats=2, check_steps=3, gpu_warmup_s=0)
LAUNCHER = [TORCHRUN, "--nproc-per-node", "2"]

pytestmark = pytest.mark.skipif(not Path(TORCHRUN).exists() or not torch.distributed.is_available(),
                                reason="needs torchrun and torch.distributed")


@pytest.fixture(autouse=True)
def _workdirs_in_tmp_path(tmp_path, monkeypatch):
    """tune's work folders (new_workdir) go under the test's own tmp_path, removed with it."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_the_launcher_and_the_worker_are_told_apart():
    target = parse_target(["torchrun", "--nproc-per-node", "2", "--standalone", str(SCRIPT), "--steps", "3"])
    assert split_launcher(target) == (["torchrun", "--nproc-per-node", "2", "--standalone"], [str(SCRIPT), "--steps", "3"])
    target = parse_target(["python3", "-m", "torch.distributed.run", "--nproc_per_node=2", str(SCRIPT)])
    assert split_launcher(target) == (["python3", "-m", "torch.distributed.run", "--nproc_per_node=2"], [str(SCRIPT)])
    assert split_launcher(parse_target([str(SCRIPT), "--steps", "3"])) == ([], [str(SCRIPT), "--steps", "3"])


def test_every_rank_is_measured_and_compared(tmp_path):
    workdir = new_workdir()
    eager, reference = run_candidate(SCRIPT, [], "eager", SMALL, workdir, 300, launcher=LAUNCHER)
    ranks = sorted(workdir.glob("eager.*.json"))
    measured = [json.loads(p.read_text()) for p in ranks]
    assert [m["rank"] for m in measured] == [0, 1] and all(m["complete"] for m in measured)
    assert eager.status == "ok" and eager.rank_ms == [m["ms_per_iter"] for m in measured]
    assert eager.ms_per_iter == max(m["ms_per_iter"] for m in measured)   # the slowest rank's
    assert [p.name for p in reference] == ["eager.0.params.pt", "eager.1.params.pt"]
    rank0, rank1 = (torch.load(p) for p in reference)
    assert all(torch.equal(a, b) for a, b in zip(rank0, rank1))   # DDP keeps the ranks in step

    from tuner.runner import check_against_eager

    same, snapshots = run_candidate(SCRIPT, [], "again", SMALL, workdir, 300, launcher=LAUNCHER, target=SCRIPT)
    check_against_eager(same, reference, snapshots, 1e-3)
    assert same.correct is True and same.rank_differences == [0.0, 0.0]
    moved, snapshots = run_candidate(SCRIPT, ["--perturb-rank", "1"], "moved", SMALL, workdir, 300,
                                     launcher=LAUNCHER, target=SCRIPT)
    check_against_eager(moved, reference, snapshots, 1e-3)
    assert moved.status == "mismatch" and moved.rank_differences[0] == 0.0 and moved.rank_differences[1] > 1e-3
    # the difference, computed here from the files: rank 1 moved by 0.5 in step 3, the last before the snapshot
    theirs = torch.load(snapshots[1])
    expected = max(float((a - b).abs().max()) for a, b in zip(rank1, theirs)) / max(float(a.abs().max()) for a in rank1)
    assert moved.rank_differences[1] == pytest.approx(expected, rel=1e-6)


def test_tune_under_torchrun_on_the_cpu(tmp_path):
    script = tmp_path / "ddp_cpu.py"
    shutil.copy(SCRIPT, script)
    result = CliRunner().invoke(cli, ["tune", "--json", "--scopes", "full_iteration_allreduce_outside", "--warmup", "2", "--iterations", "6",
                                      "--repeats", "2", "--check-steps", "3", "--", *LAUNCHER, str(script)],
                                env={"CG_ADVISE_ALLOW_NO_CUDA": "1"})
    assert result.exit_code == 0, result.stderr
    saved = json.loads(result.stdout)
    assert saved["launcher"] == LAUNCHER and saved["winner"] == "eager"
    assert len(saved["eager_rank_ms"]) == 2 and saved["eager_ms"] == max(saved["eager_rank_ms"])
    row, = saved["rows"]
    assert (row["scope"], row["failure"]["kind"]) == ("full_iteration_allreduce_outside", "ran-eagerly")   # no GPU
    assert len(row["rank_ms"]) == 2


def test_cpus_and_modules_are_refused_under_torchrun():
    result = CliRunner().invoke(cli, ["tune", "--cpus", "0-1", "--", *LAUNCHER, str(SCRIPT)])
    assert (result.exit_code, result.stderr) == (2, "cg-advise: error: --cpus pins one process; under torchrun the ranks "
                                                    "would share those CPUs: leave it out\n")
    result = CliRunner().invoke(cli, ["tune", "--", *LAUNCHER, "-m", "some.module"])
    assert (result.exit_code, result.stderr) == (2, "cg-advise: error: tune needs a script file, not a module (its training "
                                                    "loop is rewritten per scope)\n")


def free_port() -> str:
    """A port free now: a fixed one collided with another run of the tests on the same machine
    (EADDRINUSE)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def one_rank_env() -> dict:
    """The environment of one rank of one, without torchrun."""
    return {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": free_port()}


def torchrun(script, *args, cwd, env=None):
    """The script under 2-process torchrun; its ranks' printed lines. A rank that aborts with
    std::terminate's "without an active exception" (Gloo's threads torn down under a live
    interpreter on a loaded CPU machine, pytorch/pytorch#179291; seen once in about 30 runs of
    these tests) gets the whole launch once more: any other failure, or that one twice, fails."""
    env = {**os.environ, "PYTHONPATH": PACKAGE_PARENT, **(env or {})}
    for _ in range(2):
        done = subprocess.run([*LAUNCHER, "--master-port", free_port(), str(script), *args], capture_output=True,
                              text=True, cwd=cwd, env=env, timeout=300)
        if done.returncode == 0 or "terminate called without an active exception" not in done.stderr:
            break
    assert done.returncode == 0, done.stderr[-3000:]
    # the ranks share stdout: one rank's line can land inside another's before its newline
    return sorted(line.strip() for line in re.findall(r"rank \d+: .*?(?=rank \d+: |$)", done.stdout, flags=re.M))


def test_the_helper_averages_gradients_as_ddp_does(tmp_path):
    lines = torchrun(ROOT / "tests" / "scripts" / "ddp_average_check.py", cwd=tmp_path)
    assert len(lines) == 2
    for line in lines:
        difference, local = float(line.split()[3]), float(line.split()[5])
        assert difference <= 1e-6 and local > 1e-4   # the ranks' own gradients did differ


WORKLOAD_ARGS = ("--steps", "8", "--width", "16")


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """(folder, what each rank prints) of bench's DDP workload run as it is."""
    folder = tmp_path_factory.mktemp("ddp")
    for name in ("ddp_train.py", "ddp_common.py"):
        shutil.copy(ROOT / "bench" / "workloads" / name, folder / name)
    return folder, torchrun(folder / "ddp_train.py", *WORKLOAD_ARGS, cwd=folder)


def test_ddp_full_iteration_with_the_allreduce_inside_is_refused(workload):
    """Measured on two H200 (bench/results/ddp_h200.md): the all-reduce captured inside the
    graph hung before the first replay."""
    folder, _ = workload
    with pytest.raises(CgAdviseError, match="cannot apply full_iteration: model is DistributedDataParallel: .* on two "
                                            r"H200 GPUs \(torch 2.11\), so it is not offered under DDP"):
        make_patch(folder / "ddp_train.py", "full_iteration")


@pytest.mark.parametrize("scope", ["full_iteration_allreduce_outside", "fwd_bwd", "submodule"])
def test_every_ddp_graph_scope_builds_ddp_on_a_side_stream(scope, workload):
    """DDP keeps each parameter's gradient accumulator from its construction, and autograd runs
    it on the stream current then: built on the default stream, the captured backward was
    invalidated on two H200 (bench/ddp_capture_probe.py); built under a side stream, it ran."""
    folder, _ = workload
    patched = make_patch(folder / "ddp_train.py", scope).patched_bytes.decode()
    assert "    model = _cg_on_side_stream(lambda: DDP(net.to(device), device_ids=" in patched
    assert patched.count("DDP(net.to(device)") == 1
    if scope != "full_iteration_allreduce_outside":   # the wrapped module is graphed: DDP's hooks stay armed
        assert "_cg_unwrapped(model)" in patched and "_cg_graph_forward(model)" not in patched
    else:
        assert "allreduce=_cg_if_ddp(model)" in patched


BUILT_BEFORE_TORCH = """import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch import manual_seed, nn

dist.init_process_group("gloo")
manual_seed(0)
model = DDP(nn.Linear(4, 4))
import torch
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.ones(2, 4)).sum()
    loss.backward()
    opt.step()
print("loss", loss.item())
"""
TORCH_AS_TH = """import torch as th
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
th.manual_seed(0)
model = DDP(th.nn.Linear(4, 4))
opt = th.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(th.ones(2, 4)).sum()
    loss.backward()
    opt.step()
print("loss", loss.item())
"""


@pytest.mark.parametrize("imports", ["built before torch is imported", "torch imported as th"])
@pytest.mark.parametrize("scope", ["full_iteration_allreduce_outside", "fwd_bwd"])
def test_the_side_stream_helper_is_defined_before_ddp_is_built(scope, imports, tmp_path):
    """The helper goes before the first statement that calls it, with ``import torch`` where
    nothing before it binds ``torch`` (``import torch as th`` does not)."""
    text = BUILT_BEFORE_TORCH if imports == "built before torch is imported" else TORCH_AS_TH
    script = tmp_path / "script.py"
    script.write_text(text)
    patched = make_patch(script, scope).patched_bytes.decode()
    assert patched.index("def _cg_on_side_stream") < patched.index("model = _cg_on_side_stream(lambda: DDP(")
    assert re.search(r"^import torch$", patched[:patched.index("def _cg_on_side_stream")], flags=re.M)
    env = one_rank_env()
    for name, source in (("original.py", text), ("patched.py", patched)):
        (tmp_path / name).write_text(source)
    runs = [subprocess.run([sys.executable, name], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
            for name in ("original.py", "patched.py")]
    assert runs[1].returncode == 0, runs[1].stderr[-2000:]
    assert runs[1].stdout == runs[0].stdout


@pytest.mark.parametrize("scope", ["full_iteration_allreduce_outside", "fwd_bwd", "submodule"])
def test_ddp_rewrites_run_to_the_end_as_eager_on_the_cpu(scope, workload):
    """Without a GPU each rewrite takes its eager path: it must run under torchrun to the end and
    print what the original prints (the GPU path is measured by bench/gpu_ddp.py)."""
    folder, eager = workload
    patched = folder / f"patched_{scope}.py"
    patched.write_bytes(make_patch(folder / "ddp_train.py", scope).patched_bytes)
    assert torchrun(patched, *WORKLOAD_ARGS, cwd=folder) == eager and len(eager) == 2


def test_the_gpu_failure_scripts_are_python():
    """bench/gpu_ddp.py's multi-rank failure scripts run only on two GPUs: here, they must compile."""
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_ddp import FAILURES

    for name, text in FAILURES.items():
        compile(text.replace("{cuda}", "True").replace("{backend}", "nccl"), name, "exec")


def test_a_ddp_model_built_in_a_helper_is_never_graphed_as_a_plain_module(workload):
    """DDP returned by a helper: find_ddp cannot tie it to the loop's model, and graphing the
    wrapper as a plain module would skip its all-reduce, so every graph scope is refused."""
    folder, _ = workload
    text = (folder / "ddp_train.py").read_text()
    built = "    model = DDP(net.to(device), device_ids=[device.index] if device.type == \"cuda\" else None)\n"
    assert built in text
    wrapped = folder / "ddp_wrap.py"
    wrapped.write_text(text.replace(built, "    model = wrap(net, device)\n").replace(
        "def main():", "def wrap(net, device):\n    return DDP(net.to(device))\n\n\ndef main():"))
    for scope in ("fwd_bwd", "submodule", "full_iteration"):
        with pytest.raises(CgAdviseError, match="builds a DistributedDataParallel that cg-advise cannot trace"):
            make_patch(wrapped, scope)
    assert make_patch(wrapped, "compile").patched_bytes   # torch's own, left to torch


CORPUS = ROOT / "tests" / "corpus"
GOLDEN = ROOT / "tests" / "patch_golden"
# corpus scripts with several DDP constructions: the model built in an if's two branches inside
# main(), and a GAN whose generator and discriminator are each DDP; both run on the CPU (gloo)
SEVERAL_DDP = {"ddp_two_branches": ("full_iteration_allreduce_outside", "fwd_bwd", "submodule"),
               "ddp_gan": ("fwd_bwd", "submodule")}
# corpus scripts whose model is DDP on one path only or by a construction cg-advise cannot tie to
# a name: wrapped only under torchrun (a plain run trains the bare module), a second model wrapped
# by the script's helper (`head = wrap(head)`), DDP through an alias made by assignment and bound
# by an annotated assignment. They run at module level, under torchrun and (the first) as one process
ANY_PATH_DDP = {"ddp_one_branch": ("full_iteration_allreduce_outside", "fwd_bwd", "submodule"),
                "ddp_helper_wrapped": ("fwd_bwd", "submodule"),
                "ddp_alias_annotated": ("full_iteration_allreduce_outside", "fwd_bwd", "submodule")}
CONSTRUCTION = r"\b(?:torch\.nn\.parallel\.)?(?:DDP|DistributedDataParallel)\("
ON_SIDE_STREAM = "_cg_on_side_stream(lambda: "


def constructions_off_the_side_stream(original: str, patched: str) -> list:
    """The DDP constructions of ``patched`` not built as ``_cg_on_side_stream(lambda: DDP(...))``,
    by line; and the constructions must be the original's, as many."""
    built = [m for m in re.finditer(CONSTRUCTION, patched)]
    assert len(built) == len(re.findall(CONSTRUCTION, original)) > 0
    return [patched[:m.start()].count("\n") + 1 for m in built if not patched[:m.start()].endswith(ON_SIDE_STREAM)]


@pytest.mark.parametrize("name,scope", [(n, s) for n, scopes in {**SEVERAL_DDP, **ANY_PATH_DDP}.items() for s in scopes]
                         + [("ddp_sampler", s) for s in ("full_iteration_allreduce_outside", "fwd_bwd", "submodule")])
def test_every_ddp_construction_in_the_file_is_built_on_a_side_stream(name, scope):
    """Not only the last ``model = DDP(...)`` in the file: the branch that runs on a GPU is the
    first of ddp_two_branches, and a GAN's discriminator is DDP as well as its generator.
    The helper is defined before the first statement that calls it."""
    original = (CORPUS / f"{name}.py").read_text()
    patched = make_patch(CORPUS / f"{name}.py", scope).patched
    assert patched == (GOLDEN / f"{name}.{scope}.out.py").read_text()
    assert constructions_off_the_side_stream(original, patched) == []
    assert patched.index("def _cg_on_side_stream(") < patched.index(ON_SIDE_STREAM)
    if name == "ddp_gan":   # each DDP model of the loop that is graphed is graphed inside its wrapper
        assert "_cg_unwrapped(netG)" in patched and "(netG," not in patched and "netG.children()" not in patched


def test_several_ddp_models_keep_the_allreduce_outside_scope_from_averaging_only_one():
    """full_iteration_allreduce_outside all-reduces one model's gradients after the replay:
    with the generator and the discriminator both DDP, the other's would never be averaged."""
    with pytest.raises(CgAdviseError, match="netG and netD are each DistributedDataParallel"):
        make_patch(CORPUS / "ddp_gan.py", "full_iteration_allreduce_outside")


@pytest.fixture(scope="module")
def several_ddp_eager(tmp_path_factory):
    """What each rank of each SEVERAL_DDP script prints, run as it is on the CPU."""
    folder = tmp_path_factory.mktemp("several_ddp")
    return folder, {name: torchrun(CORPUS / f"{name}.py", cwd=folder, env=SEVERAL_DDP_ENV)
                    for name in {**SEVERAL_DDP, **ANY_PATH_DDP}}


SEVERAL_DDP_ENV = {"CG_STEPS": "12", "CUDA_VISIBLE_DEVICES": ""}


@pytest.mark.parametrize("name,scope", [(n, s) for n, scopes in SEVERAL_DDP.items() for s in scopes])
def test_rewrites_with_several_ddp_constructions_run_to_the_end_on_the_cpu(name, scope, several_ddp_eager):
    """Under torchrun on the CPU each DDP is built through the helper (as it was, without a
    GPU) and every rank prints what the original prints."""
    folder, eager = several_ddp_eager
    patched = folder / f"{name}.{scope}.py"
    patched.write_text(make_patch(CORPUS / f"{name}.py", scope).patched)
    assert torchrun(patched, cwd=folder, env=SEVERAL_DDP_ENV) == eager[name] and len(eager[name]) == 2


ELSEWHERE = """import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def wrap(module):
    return DDP(module)


class Teacher:
    def __init__(self, net):
        self.net = DDP(net)


dist.init_process_group("gloo")
torch.manual_seed(0)
teacher = Teacher(nn.Linear(4, 4))
helpers = [DDP(m) for m in [nn.Linear(4, 4)]]
extra = wrap(nn.Linear(4, 4))
model = torch.nn.parallel.DistributedDataParallel(nn.Linear(4, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.ones(2, 4)).sum()
    loss.backward()
    opt.step()
print("loss", loss.item())
"""


@pytest.mark.parametrize("scope", ["full_iteration_allreduce_outside", "fwd_bwd"])
def test_ddp_built_in_a_helper_a_method_or_a_comprehension_is_on_a_side_stream_too(scope, tmp_path):
    """Any DDP the file builds may share the graphed backward: each one is wrapped, the helper
    goes before the first function that builds one, and the script still runs as it did."""
    script = tmp_path / "script.py"
    script.write_text(ELSEWHERE)
    patched = make_patch(script, scope).patched
    assert constructions_off_the_side_stream(ELSEWHERE, patched) == []
    assert patched.index("def _cg_on_side_stream(") < patched.index("def wrap(")
    env = one_rank_env()
    (tmp_path / "patched.py").write_text(patched)
    runs = [subprocess.run([sys.executable, name], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
            for name in ("script.py", "patched.py")]
    assert runs[1].returncode == 0, runs[1].stderr[-2000:]
    assert runs[1].stdout == runs[0].stdout


@pytest.mark.parametrize("built,why", [
    ("extra = DDP((inner := nn.Linear(4, 4)))\n", "an argument binds a name with :="),
    ("class Holder:\n    inner = nn.Linear(4, 4)\n    wrapped = DDP(inner)\n",
     "it is built in a class body, whose names a lambda does not see"),
    ("class Holder:\n    wrapped = [m for m in [DDP(nn.Linear(4, 4))]]\n",
     "it is built in a class body, whose names a lambda does not see"),
    ("class Holder(nn.Module):\n    def wrapped(self):\n        return DDP(super().__init__())\n",
     r"an argument calls super\(\), locals\(\) or vars\(\) without arguments"),
])
def test_a_ddp_construction_a_lambda_would_evaluate_otherwise_is_refused(built, why, tmp_path):
    """``lambda: DDP(...)`` evaluates its arguments in a scope of its own: a construction whose
    meaning that changes is refused by line, never rewritten into a script that breaks."""
    script = tmp_path / "script.py"
    text = ELSEWHERE.replace("model = torch", built + "model = torch")
    script.write_text(text)
    line = text[:text.index(built)].count("\n") + 1 + built.count("\n") - 1
    for scope in DDP_GRAPH_SCOPES:
        with pytest.raises(CgAdviseError, match=f"cannot apply {scope}: line {line}: DistributedDataParallel must be "
                                                f"built under a side stream .*, but {why}"):
            make_patch(script, scope)
    assert make_patch(script, "compile").patched   # DDP left as it is: torch's own


# what the rewrite graphed, printed by each rank at the end of an ANY_PATH_DDP script: the
# modules _cg_graph_forward took (its forward a _CgForward, on the CPU too); the DDP wrapper never
GRAPHED = {"ddp_one_branch": "model", "ddp_helper_wrapped": "encoder, head", "ddp_alias_annotated": "model"}
# one string, one write: the ranks share stdout, and print's separate writes of its arguments interleaved
PRINT_GRAPHED = ('\nprint(f"rank {{rank}}: graphed {{[type(m).__name__ for wrapper in ({models},) '
                 'for m in wrapper.modules() if type(m.__dict__.get(\'forward\')).__name__ == \'_CgForward\']!r}}")\n')
EXPECTED_GRAPHED = {("ddp_one_branch", "fwd_bwd"): ["Sequential"],
                    ("ddp_one_branch", "submodule"): ["Linear", "Linear"],
                    ("ddp_helper_wrapped", "fwd_bwd"): ["Sequential", "Linear"],
                    ("ddp_helper_wrapped", "submodule"): ["Linear", "Linear"],   # the head's Linear has no children
                    ("ddp_alias_annotated", "fwd_bwd"): ["Sequential"],
                    ("ddp_alias_annotated", "submodule"): ["Linear", "Linear"]}


def patched_with_graphed(name: str, scope: str, folder: Path) -> Path:
    """The rewrite of corpus script ``name``, printing at its end what it graphed."""
    patched = folder / f"{name}.{scope}.graphed.py"
    patched.write_text(make_patch(CORPUS / f"{name}.py", scope).patched + PRINT_GRAPHED.format(models=GRAPHED[name]))
    return patched


def split_graphed(lines: list) -> tuple:
    """(the script's own lines, the graphed lists) of what the ranks printed."""
    graphed = [line for line in lines if ": graphed " in line]
    return [line for line in lines if line not in graphed], [line.split(": graphed ")[1] for line in graphed]


@pytest.mark.parametrize("name,scope", [(n, s) for n, scopes in ANY_PATH_DDP.items() for s in scopes])
def test_a_model_ddp_on_one_path_is_graphed_as_that_path_built_it_under_torchrun(name, scope, several_ddp_eager):
    """Under torchrun each rank prints what the original prints, and each graphed model is the
    module its DDP wraps: never the wrapper (whose graph would skip the all-reduce), whether the
    script wrapped it in one branch, through a helper (`head = wrap(head)`) or through an alias
    (`model: DDP = DDP(net)` with `DDP = torch.nn.parallel.DistributedDataParallel`)."""
    folder, eager = several_ddp_eager
    lines, graphed = split_graphed(torchrun(patched_with_graphed(name, scope, folder), cwd=folder, env=SEVERAL_DDP_ENV))
    assert lines == eager[name] and len(lines) == 2
    if scope == "full_iteration_allreduce_outside":
        assert graphed == ["[]", "[]"]
    else:
        assert graphed == [repr(EXPECTED_GRAPHED[name, scope])] * 2


def single_process(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    """``python script`` with no torchrun variables: a plain one-process run, no process group."""
    launched = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK",
                "ROLE_RANK", "TORCHELASTIC_RUN_ID")
    env = {**{k: v for k, v in os.environ.items() if k not in launched}, **SEVERAL_DDP_ENV}
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


@pytest.mark.parametrize("scope", ANY_PATH_DDP["ddp_one_branch"])
def test_a_model_ddp_in_one_branch_runs_as_one_process_without_ddp(scope, tmp_path):
    """Run as a plain script, ddp_one_branch never builds DDP (`model = net`): the rewrite must
    graph the model itself, where `model.module` raised AttributeError, and train as the
    original does; full_iteration_allreduce_outside all-reduces nothing (`_cg_if_ddp` is None)."""
    original = single_process(CORPUS / "ddp_one_branch.py", tmp_path)
    assert original.returncode == 0, original.stderr[-2000:]
    assert original.stdout.startswith("rank 0: loss ")
    rewritten = single_process(patched_with_graphed("ddp_one_branch", scope, tmp_path), tmp_path)
    assert rewritten.returncode == 0, rewritten.stderr[-2000:]
    lines = rewritten.stdout.splitlines()
    assert lines[:-1] == original.stdout.splitlines()
    expected = [] if scope == "full_iteration_allreduce_outside" else EXPECTED_GRAPHED["ddp_one_branch", scope]
    assert lines[-1] == f"rank 0: graphed {expected!r}"


def test_a_second_model_a_helper_may_have_wrapped_keeps_allreduce_outside_from_averaging_one():
    """`head = wrap(head)`: head may be DDP too, and full_iteration_allreduce_outside would
    capture the step under encoder's no_sync() only, with head's all-reduce inside the graph."""
    with pytest.raises(CgAdviseError, match=r"cannot apply full_iteration_allreduce_outside: head may be "
                                            r"DistributedDataParallel too .*under encoder\.no_sync\(\) only"):
        make_patch(CORPUS / "ddp_helper_wrapped.py", "full_iteration_allreduce_outside")


def test_find_unused_parameters_in_a_helper_refuses_the_model_it_may_have_wrapped(tmp_path):
    """A helper's DDP with find_unused_parameters=True may be the loop's untraced model: refused by
    its line, as a traced one is."""
    text = (CORPUS / "ddp_helper_wrapped.py").read_text()
    built = "    return DDP(module, device_ids=[device.index] if cuda else None)\n"
    assert built in text
    script = tmp_path / "script.py"
    script.write_text(text.replace(built, built.replace("None)", "None, find_unused_parameters=True)")))
    line = text[:text.index(built)].count("\n") + 1
    for scope in ("fwd_bwd", "submodule"):
        with pytest.raises(CgAdviseError, match=f"cannot apply {scope}: line {line}: a DistributedDataParallel built "
                                                "with find_unused_parameters=True may be head"):
            make_patch(script, scope)


ALIASED = """import torch
import torch.distributed as dist
from torch import nn
{imports}

dist.init_process_group("gloo")
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
{build}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = model(torch.ones(2, 4)).sum()
    loss.backward()
    opt.step()
print("loss", loss.item(), type(model).__name__)
"""


@pytest.mark.parametrize("imports,build", [
    ("from torch.nn.parallel import DistributedDataParallel as DDP", "model: DDP = DDP(net)"),
    ("DDP = torch.nn.parallel.DistributedDataParallel\nWrapper = DDP", "model = Wrapper(net)"),
    ("DDP: type = torch.nn.parallel.DistributedDataParallel", "model: 'DDP' = DDP(net)"),
    ("import torch.nn.parallel as par", "model = par.DistributedDataParallel(net)"),
    ("import torch as th", "model = th.nn.parallel.DistributedDataParallel(net)"),
    ("from torch.nn import parallel as tp", "model = tp.DistributedDataParallel(net)"),
    ("from torch.nn.parallel import distributed", "model = distributed.DistributedDataParallel(net)"),
])
def test_ddp_through_an_alias_or_an_annotated_assignment_is_ddp(imports, build, tmp_path):
    """An alias made by assignment (of an alias too), a module imported under another name and an
    annotated assignment: the model is DDP all the same, built under a side stream and graphed as
    the module it wraps in each DDP scope, and the script runs as it did (one rank, gloo; fwd_bwd,
    the others run in the corpus's ddp_alias_annotated)."""
    text = ALIASED.format(imports=imports, build=build)
    script = tmp_path / "script.py"
    script.write_text(text)
    for scope in DDP_GRAPH_SCOPES:
        patched = make_patch(script, scope).patched
        assert "model" + build.split("model", 1)[1].replace("= ", "= _cg_on_side_stream(lambda: ", 1) + ")" in patched
        assert ("allreduce=_cg_if_ddp(model)" if scope == "full_iteration_allreduce_outside"
                else "_cg_unwrapped(model)") in patched
    (tmp_path / "patched.py").write_text(make_patch(script, "fwd_bwd").patched)
    env = one_rank_env()
    runs = [subprocess.run([sys.executable, name], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
            for name in ("script.py", "patched.py")]
    assert runs[0].returncode == 0, runs[0].stderr[-2000:]
    assert runs[1].returncode == 0, runs[1].stderr[-2000:]
    assert runs[1].stdout == runs[0].stdout and "DistributedDataParallel" in runs[0].stdout
