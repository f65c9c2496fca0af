"""Which way of capturing a DDP training step (forward and backward under ``no_sync()``, the
optimizer step, the all-reduce outside the graph) survives the capture on several GPUs:
issue #16's question of why ``full_iteration_allreduce_outside`` was invalidated on two H200.

    torchrun --nproc-per-node 2 bench/ddp_capture_probe.py VARIANT
    python bench/ddp_capture_probe.py --all        # every variant, each in its own torchrun

Variants: where DistributedDataParallel is built (the default stream, or a side stream: its
retained gradient accumulators run backward on the stream they were made on), the capture's
error mode (global, thread_local) and stream, and whether DDP's forward runs in the capture.
Each rank prints one line: ``VARIANT rank R: captured, N replays, parameters equal to eager's
on every rank: True`` or the first error.
"""
import contextlib
import os
import subprocess
import sys

VARIANTS = {  # name: (DDP built on a side stream, capture error mode, capture on DDP's stream, call model.module)
    "default_stream_thread_local": (False, "thread_local", False, False),
    "default_stream_module_thread_local": (False, "thread_local", False, True),
    "side_stream_thread_local": (True, "thread_local", False, False),
    "side_stream_global": (True, "global", False, False),
    "side_stream_same_capture_stream": (True, "thread_local", True, False),
}


def probe(variant: str) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    side_build, mode, same_stream, call_module = VARIANTS[variant]
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 8)).cuda()
    reference = [p.detach().clone() for p in net.parameters()]
    build_stream = torch.cuda.Stream()
    if side_build:
        build_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(build_stream):
            model = DDP(net, device_ids=[torch.cuda.current_device()])
        torch.cuda.current_stream().wait_stream(build_stream)
    else:
        model = DDP(net, device_ids=[torch.cuda.current_device()])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    generator = torch.Generator().manual_seed(1 + rank)
    batches = [(torch.randn(32, 64, generator=generator).cuda(), torch.randn(32, 8, generator=generator).cuda())
               for _ in range(8)]
    forward = model.module if call_module else model

    def step(x, y):
        optimizer.zero_grad(set_to_none=False)
        loss = nn.functional.mse_loss(forward(x), y)
        loss.backward()
        return loss

    def average():
        grads = [p.grad for p in net.parameters()]
        flat = torch._utils._flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        for grad, mean in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
            grad.copy_(mean)

    try:
        static_x, static_y = batches[0][0].clone(), batches[0][1].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), model.no_sync():
            for _ in range(3):
                step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=False)
        stream = build_stream if same_stream else None
        with model.no_sync(), torch.cuda.graph(graph, stream=stream, capture_error_mode=mode):
            step(static_x, static_y)
        # put the parameters back, then train 8 steps: replay + all-reduce + optimizer step
        with torch.no_grad():
            for p, saved in zip(net.parameters(), reference):
                p.copy_(saved)
        optimizer.state.clear()
        for x, y in batches:
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            average()
            optimizer.step()
        graphed = [p.detach().clone() for p in net.parameters()]
        # eager DDP from the same start
        with torch.no_grad():
            for p, saved in zip(net.parameters(), reference):
                p.copy_(saved)
        optimizer.state.clear()
        for x, y in batches:
            optimizer.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
        torch.cuda.synchronize()
        worst = max(float((g - p).abs().max() / (p.abs().max() + 1e-12)) for g, p in zip(graphed, net.parameters()))
        print(f"{variant} rank {rank}: captured, {len(batches)} replays, largest relative difference from eager DDP "
              f"{worst:.2e}", flush=True)
    except Exception as error:   # the probe reports, whatever it is
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"{variant} rank {rank}: FAILED {type(error).__name__}: {first}", flush=True)
    with contextlib.suppress(Exception):
        dist.destroy_process_group()


def main() -> None:
    if sys.argv[1:] == ["--all"]:
        for variant in VARIANTS:
            try:
                done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                                       __file__, variant], capture_output=True, text=True, timeout=90)
                lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(variant)]
                print("\n".join(lines) or f"{variant}: no result, exit {done.returncode}\n{done.stderr[-800:]}",
                      flush=True)
            except subprocess.TimeoutExpired:
                print(f"{variant}: hung (killed after 90 s)", flush=True)
        return
    probe(sys.argv[1])


if __name__ == "__main__":
    main()
