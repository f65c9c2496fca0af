"""Issue #16's evidence on two GPUs: `cg-advise tune` under torchrun for three DDP workloads
(a launch-bound MLP, a small transformer, the transformer with no_sync() gradient
accumulation), each scope's slowest-rank ms/iteration and every rank's parameters against
eager's; then the chosen rewrite run under torchrun to the end of the script, what it prints
compared with eager's; then small scripts that fail only with several ranks, for the real
messages of the failure classes.

    python bench/gpu_ddp.py --out OUT                 # two GPUs, NCCL: about 7 minutes on 2 H200
    python bench/gpu_ddp.py --out OUT --cpu           # the same plumbing on the CPU (gloo), tiny sizes

Writes OUT/gpu_ddp.json (updated after every step, so a run cut short keeps what it measured),
OUT/gpu_ddp.log (every command and its output) and OUT/failures/*.txt (the failing scripts'
output). Stops starting work at --deadline seconds.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.patch import make_patch  # noqa: E402  (also checks libcst and pyflakes are here)

SCOPES = "full_iteration,full_iteration_allreduce_outside,fwd_bwd,submodule"
WORKLOADS = {   # name: (script, its arguments on the GPUs, on the CPU)
    "mlp": ("ddp_train.py", "--model mlp --steps 400 --batch 32 --width 256", "--model mlp --steps 30 --width 16"),
    "transformer": ("ddp_train.py", "--model transformer --steps 300 --batch 16 --width 256",
                    "--model transformer --steps 30 --batch 4 --width 16"),
    "transformer_accumulate": ("ddp_accumulate.py", "--model transformer --accumulate 4 --steps 200 --batch 16 "
                               "--width 256", "--model transformer --accumulate 2 --steps 30 --batch 4 --width 16"),
}
TIMING = {"gpu": "--warmup 20 --iterations 150 --repeats 5", "cpu": "--warmup 2 --iterations 10 --repeats 2"}
PRINTED = re.compile(r"rank (\d+): last loss (-?\d+\.\d{6}) parameter checksum (-?\d+\.\d{6})")
FAILURE_WAIT = 75.0   # seconds for the failure scripts, all at once (their process groups time out after 15)

# scripts that fail only with several ranks; {backend} is nccl or gloo
FAILURES = {
    "collective_on_one_rank": '''
import datetime, os, torch, torch.distributed as dist
cuda = {cuda}
dist.init_process_group("{backend}", timeout=datetime.timedelta(seconds=15))
if cuda:
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
t = torch.ones(4, device="cuda" if cuda else "cpu")
dist.all_reduce(t)
if dist.get_rank() == 1:   # a collective on one rank only
    dist.all_reduce(t)
dist.all_reduce(t)
if cuda:
    torch.cuda.synchronize()
dist.barrier()
print("finished", flush=True)
''',
    "capture_replayed_unevenly": '''
import datetime, os, torch, torch.distributed as dist
os.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0"
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=15))
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
t = torch.ones(1 << 20, device="cuda")
dist.all_reduce(t)   # the communicator set up before the capture
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        dist.all_reduce(t)
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    dist.all_reduce(t)
for _ in range(2 if dist.get_rank() == 0 else 1):   # mismatched replays across ranks
    graph.replay()
dist.all_reduce(t)
torch.cuda.synchronize()
dist.barrier()
print("finished", flush=True)
''',
    "ddp_wrapper_graphed": '''
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl")
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    model = DDP(torch.nn.Linear(64, 64).cuda(), device_ids=[int(os.environ["LOCAL_RANK"])])
torch.cuda.current_stream().wait_stream(side)
x = torch.randn(8, 64, device="cuda")
graphed = torch.cuda.make_graphed_callables(model, (x,), num_warmup_iters=11)   # the wrapper, not model.module
for _ in range(3):
    graphed(x).sum().backward()
torch.cuda.synchronize()
grad = model.module.weight.grad.clone()
mean = grad.clone()
dist.all_reduce(mean)
mean /= dist.get_world_size()
print(f"rank {dist.get_rank()}: gradient all-reduced: {torch.allclose(grad, mean)}", flush=True)
''',
    "full_capture_default_stream_ddp": '''
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("nccl")   # torchrun's TORCH_NCCL_ASYNC_ERROR_HANDLING=1 kept
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = DDP(torch.nn.Linear(64, 64).cuda(), device_ids=[int(os.environ["LOCAL_RANK"])])   # default stream
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(8, 64, device="cuda")
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):   # fewer than the 11 DDP iterations asked for
        optimizer.zero_grad(set_to_none=True)
        model(x).sum().backward()
        optimizer.step()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
optimizer.zero_grad(set_to_none=True)
with torch.cuda.graph(graph):
    model(x).sum().backward()
    optimizer.step()
for _ in range(3):
    graph.replay()
torch.cuda.synchronize()
print(f"rank {dist.get_rank()}: captured and replayed", flush=True)
''',
}


class Run:
    def __init__(self, out: Path, cpu: bool, deadline: float):
        self.out, self.cpu, self.deadline = out, cpu, time.monotonic() + deadline
        self.log = open(out / "gpu_ddp.log", "a")
        self.result = {"cpu": cpu, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                       "workloads": {}, "failures": {}}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def save(self) -> None:
        (self.out / "gpu_ddp.json").write_text(json.dumps(self.result, indent=1) + "\n")

    def run(self, command: list, cwd: Path, timeout: float, env=None) -> tuple:
        """(exit code or None on a timeout, stdout, stderr, seconds); all of it into the log."""
        start = time.monotonic()
        self.log.write(f"\n$ (cd {cwd}; {' '.join(command)})  [timeout {timeout:.0f} s]\n")
        self.log.flush()
        process = subprocess.Popen(command, cwd=cwd, env={**os.environ, **(env or {})}, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=max(1.0, timeout))
            code = process.returncode
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            stdout, stderr = process.communicate()
            code = None
        seconds = time.monotonic() - start
        self.log.write(f"{stdout}\n--- stderr\n{stderr}\n--- exit {code} after {seconds:.1f} s\n")
        self.log.flush()
        return code, stdout, stderr, seconds


def importable() -> str:
    """The checkout first, the PYTHONPATH already set kept after it (the GPU machine's wheels)."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def torchrun() -> list:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]


def printed(stdout: str) -> dict:
    """rank -> (last loss, parameter checksum) from what the workload prints at its end."""
    found = {}
    for match in PRINTED.finditer(stdout):   # the ranks' lines may interleave
        found[match.group(1)] = (float(match.group(2)), float(match.group(3)))
    return found


def same_numbers(a: dict, b: dict, tolerance: float) -> bool:
    return bool(a) and a.keys() == b.keys() and all(
        abs(x - y) <= tolerance * max(abs(x), abs(y), 1e-12) for rank in a for x, y in zip(a[rank], b[rank]))


def tune_workload(run: Run, name: str, work: Path, budget: float, scopes: str = SCOPES) -> None:
    script, gpu_args, cpu_args = WORKLOADS[name]
    args = (cpu_args if run.cpu else gpu_args).split()
    entry = run.result["workloads"].setdefault(name, {"script": script, "args": args})
    command = [sys.executable, "-m", "advisor.cli", "tune", "--json", "--scopes", scopes,
               *TIMING["cpu" if run.cpu else "gpu"].split(), "--budget", f"{budget:.0f}", "--",
               *torchrun(), script, *args]
    env = {"PYTHONPATH": importable(), **({"CG_ADVISE_ALLOW_NO_CUDA": "1"} if run.cpu else {})}
    code, stdout, stderr, seconds = run.run(command, work, budget + 120, env)
    entry["tune"] = {"exit": code, "seconds": round(seconds, 1), "stderr_tail": stderr.strip().splitlines()[-12:]}
    try:
        saved = json.loads(stdout)
    except ValueError:
        return
    entry["tune"]["eager_ms"], entry["tune"]["eager_rank_ms"] = saved["eager_ms"], saved.get("eager_rank_ms")
    entry["tune"]["winner"], entry["tune"]["note"] = saved["winner"], saved.get("note")
    entry["tune"]["rows"] = [{k: row.get(k) for k in ("scope", "status", "ms_per_iter", "rank_ms", "speedup", "correct",
                                                      "rank_differences", "peak_mb", "failure")}
                             for row in saved["rows"]]
    entry["tune"]["eager_peak_mb"] = saved.get("eager_peak_mb")


def to_the_end(run: Run, name: str, work: Path, tolerance: float) -> None:
    """The winner (else the fastest scope that ran and matched) patched and run whole under
    torchrun, its printed loss and checksum on every rank against eager's."""
    script, gpu_args, cpu_args = WORKLOADS[name]
    args = (cpu_args if run.cpu else gpu_args).split()
    entry = run.result["workloads"][name]
    rows = [r for r in (entry.get("tune") or {}).get("rows", []) if r["status"] == "ok" and r["correct"] is not False]
    winner = (entry.get("tune") or {}).get("winner")
    scope = winner if winner not in (None, "eager") else (rows[0]["scope"] if rows else None)
    if run.cpu and scope is None:   # no graph runs on the CPU: the rewrite's eager path shows the plumbing
        scope = "fwd_bwd"
    if scope is None:
        entry["to_the_end"] = {"skipped": "no scope ran and matched eager"}
        return
    patched = work / f"{Path(script).stem}.{scope}.py"
    patched.write_bytes(make_patch(work / script, scope).patched_bytes)
    env = {"PYTHONPATH": importable()}
    results = {}
    for label, path in (("eager", script), (scope, patched.name)):
        code, stdout, stderr, seconds = run.run([*torchrun(), path, *args], work, 300, env)
        results[label] = {"exit": code, "seconds": round(seconds, 1), "printed": printed(stdout),
                          "stderr_tail": stderr.strip().splitlines()[-5:] if code else []}
    entry["to_the_end"] = {"scope": scope, "runs": results, "tolerance": tolerance,
                           "same_as_eager": results["eager"]["exit"] == 0 and results[scope]["exit"] == 0
                           and same_numbers(results["eager"]["printed"], results[scope]["printed"], tolerance)}


def failures(run: Run, work: Path) -> None:
    """The multi-rank failure scripts, all at once (they wait on timeouts, not on the GPUs)."""
    folder = run.out / "failures"
    folder.mkdir(exist_ok=True)
    names = [n for n in FAILURES if not run.cpu or n == "collective_on_one_rank"]
    processes = {}
    for port, name in enumerate(names, start=29611):
        path = work / f"{name}.py"
        path.write_text(FAILURES[name].replace("{cuda}", str(not run.cpu)).replace("{backend}",
                                                                                  "gloo" if run.cpu else "nccl"))
        log = open(folder / f"{name}.txt", "w")
        command = [*torchrun(), "--master-port", str(port), path.name]
        run.log.write(f"\n$ (cd {work}; {' '.join(command)})  > failures/{name}.txt\n")
        processes[name] = (subprocess.Popen(command, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True), log, time.monotonic())
    from tuner.errors import classify

    for name, (process, log, start) in processes.items():
        try:
            code = process.wait(timeout=max(1.0, FAILURE_WAIT - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()
            code = None
        log.close()
        text = (folder / f"{name}.txt").read_text(errors="replace")
        failure = classify(text).to_dict() if code != 0 else None   # None: killed after FAILURE_WAIT
        run.result["failures"][name] = {"exit": code, "seconds": round(time.monotonic() - start, 1),
                                        "classified": failure, "tail": text.strip().splitlines()[-6:]}
        run.save()


def guarded(run: Run, name: str, step: str, function, *args) -> None:
    """One workload's step; an error of this script is recorded, and the other workloads go on."""
    try:
        function(run, name, *args)
    except Exception as error:   # noqa: BLE001 - the run must finish and save what it has
        run.result["workloads"].setdefault(name, {})[f"{step}_error"] = f"{type(error).__name__}: {error}"
    run.save()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--cpu", action="store_true", help="gloo on the CPU, tiny sizes: the plumbing only")
    parser.add_argument("--deadline", type=float, default=400.0, help="seconds after which no work starts")
    parser.add_argument("--only", help="workloads to run, e.g. mlp,transformer")
    parser.add_argument("--tolerance", type=float, default=1e-3, help="relative, for the printed numbers")
    parser.add_argument("--no-failures", action="store_true", help="skip the multi-rank failure scripts")
    parser.add_argument("--scopes", default=SCOPES, help=f"scopes tune tries (default: {SCOPES})")
    options = parser.parse_args()
    options.out.mkdir(parents=True, exist_ok=True)
    work = options.out / "work"   # tune saves its result beside the script: a copy, not the checkout
    work.mkdir(exist_ok=True)
    for name in ("ddp_train.py", "ddp_accumulate.py", "ddp_common.py"):
        shutil.copy(ROOT / "bench" / "workloads" / name, work / name)
    run = Run(options.out, options.cpu, options.deadline)
    import torch

    run.result["torch"] = torch.__version__
    if not options.cpu:
        if torch.cuda.device_count() < 2:
            sys.exit(f"gpu_ddp: {torch.cuda.device_count()} CUDA device(s) visible; two are needed (or --cpu)")
        run.result["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        version = torch.cuda.nccl.version()
        run.result["nccl"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
    run.save()
    names = options.only.split(",") if options.only else list(WORKLOADS)
    if not options.no_failures:   # first: they take a fixed time, and their messages are wanted whatever follows
        print("gpu_ddp: multi-rank failures", flush=True)
        failures(run, work)
    reserve = 45 * len(names)   # each workload's eager and patched runs to the end
    for i, name in enumerate(names):
        share = (run.left() - reserve) / (len(names) - i)
        if share < 30:
            run.result["workloads"][name] = {"skipped": f"deadline: {run.left():.0f} s left"}
            continue
        print(f"gpu_ddp: tune {name} (budget {share:.0f} s)", flush=True)
        guarded(run, name, "tune", tune_workload, work, share, options.scopes)
    for name in names:
        if "tune" in run.result["workloads"].get(name, {}) and run.left() > 0:
            print(f"gpu_ddp: {name} to the end", flush=True)
            guarded(run, name, "to_the_end", to_the_end, work, options.tolerance)
    run.result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    run.save()
    for name, entry in run.result["workloads"].items():
        tune = entry.get("tune") or {}
        rows = ", ".join(f"{r['scope']} {r['ms_per_iter'] or 0:.3f} ms {r['status']}"
                         + (f" ({(r['failure'] or {}).get('kind')})" if r["status"] != "ok" else "")
                         for r in tune.get("rows", []))
        end = entry.get("to_the_end") or {}
        print(f"{name}: eager {tune.get('eager_ms') or 0:.3f} ms; {rows}; winner {tune.get('winner')}; "
              f"to the end: {end.get('scope')} same as eager: {end.get('same_as_eager')}")
    for name, failure in run.result["failures"].items():
        print(f"failure {name}: exit {failure['exit']}, {(failure['classified'] or {}).get('kind')}")


if __name__ == "__main__":
    main()
