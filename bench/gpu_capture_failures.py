"""Provokes each capture failure the tuner classifies, on the GPU, and keeps what was printed.

Each case is a small training-style script written to OUT and run in its own process (a failed
capture can poison the CUDA context); its stderr goes to OUT/NAME.txt and the classification
tuner.errors gives it to OUT/classified.json. The .txt files are what tests/capture_errors/
holds.

    python bench/gpu_capture_failures.py --out OUT
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuner.errors import classify  # noqa: E402

SETUP = """import torch
from torch import nn
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)).cuda()
x = torch.randn(32, 64, device="cuda")
g = torch.cuda.CUDAGraph()
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(3):
        model(x).sum().backward()
torch.cuda.current_stream().wait_stream(side)
"""

CASES = {
    "item_in_capture": ("sync-during-capture", """
with torch.cuda.graph(g):
    loss = model(x).pow(2).mean()
    print("loss", loss.item())
"""),
    "boolean_index_in_capture": ("sync-during-capture", """
with torch.cuda.graph(g):
    y = model(x)
    positive = y[y > 0]
"""),
    "cpu_copy_in_capture": ("sync-during-capture", """
with torch.cuda.graph(g):
    y = model(x)
    host = y.cpu()
"""),
    "adam_not_capturable": ("optimizer-not-capturable", """
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
with torch.cuda.graph(g):
    model(x).pow(2).mean().backward()
    opt.step()
"""),
    "unjoined": ("unjoined-side-stream", """
other = torch.cuda.Stream()
with torch.cuda.graph(g):
    y = model(x)
    other.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(other):
        z = y * 2
"""),
    "invalidated": ("capture-invalidated", """
with torch.cuda.graph(g):
    y = model(x)
    try:
        y.sum().item()
    except RuntimeError:
        pass
    z = y * 2
"""),
    "legacy_stream": ("legacy-stream-dependency", """
with torch.cuda.graph(g):
    y = model(x)
    with torch.cuda.stream(torch.cuda.default_stream()):
        z = x * 2
"""),
    "oom": ("out-of-memory", """
with torch.cuda.graph(g):
    y = model(x)
    huge = torch.empty(1 << 48, dtype=torch.uint8, device="cuda")
"""),
    "illegal_address": ("illegal-address", """
static = torch.randn(64 << 20, device="cuda")
with torch.cuda.graph(g):
    out = static * 2
del static
torch.cuda.empty_cache()
for _ in range(10):
    g.replay()
torch.cuda.synchronize()
print(out.sum().item())
"""),
    "rng_generator": ("rng-not-graph-safe", """
gen = torch.Generator(device="cuda")
gen.manual_seed(0)
with torch.cuda.graph(g):
    noise = torch.rand(32, 64, device="cuda", generator=gen)
"""),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    classified = {}
    for name, (expected, body) in CASES.items():
        script = args.out / f"{name}.py"
        script.write_text(SETUP + body)
        try:
            run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
            stderr, code = run.stderr, run.returncode
        except subprocess.TimeoutExpired as timeout:
            stderr, code = f"timed out\n{timeout.stderr or ''}", None
        (args.out / f"{name}.txt").write_text(stderr)
        failure = classify(stderr) if code else None
        classified[name] = {"expected": expected, "returncode": code,
                            "kind": failure.kind if failure else None,
                            "where": failure.where if failure else None,
                            "message": failure.message if failure else stderr.strip().splitlines()[-1:]}
        print(name, json.dumps(classified[name]), flush=True)
    (args.out / "classified.json").write_text(json.dumps(classified, indent=1))


if __name__ == "__main__":
    main()
