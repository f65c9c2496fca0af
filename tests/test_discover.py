"""Loop discovery on a corpus of training-script styles, against golden expectations."""

import json

import pytest

from conftest import ROOT
from tuner.discover import DiscoveryError, discover

CORPUS = ROOT / "tests" / "corpus"
EXPECTED = json.loads((CORPUS / "discover.expected.json").read_text())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus(name):
    expected = EXPECTED[name]
    if "error" in expected:
        with pytest.raises(DiscoveryError) as error:
            discover(CORPUS / name)
        assert str(error.value) == f"{CORPUS / name}: {expected['error']}"
        return
    found = discover(CORPUS / name).to_dict()
    assert found.pop("path") == str(CORPUS / name)
    assert found == expected


def test_corpus_covers_the_styles():
    specs = {name: e for name, e in EXPECTED.items() if "error" not in e}
    assert {s["loop_kind"] for s in specs.values()} == {"for", "while"}
    assert any(s["function"] for s in specs.values()) and any(s["function"] is None for s in specs.values())
    assert any(s["scaler"] and s["autocast"] and s["clip_grad"] for s in specs.values())
    assert any(s["scheduler"] for s in specs.values())
    assert any(o["code"] == "item" for s in specs.values() for o in s["outside"])


def test_innermost_training_loop_wins():
    spec = discover(CORPUS / "in_function.py")
    assert (spec.line, spec.end_line, spec.batch) == (9, 16, ["images", "targets"])


def test_not_python_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("for x in :\n    pass\n")
    with pytest.raises(DiscoveryError) as error:
        discover(bad)
    assert str(error.value).startswith(f"{bad}: not a Python script")


TWO_LOOPS = '''import torch


class Trainer:
    def fit(self, model, opt, data):
        for x in data:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()


def pretrain(model, opt, data):
    for x in data:
        model(x).mean().backward()
        opt.step()
        opt.zero_grad()
'''


def test_step_names_the_function_whose_loop_is_tuned(tmp_path):
    script = tmp_path / "two.py"
    script.write_text(TWO_LOOPS)
    assert discover(script, step="pretrain").line == 13
    assert discover(script, step="two:Trainer.fit").line == 6
    assert discover(script, step="fit").to_dict()["step_name"] == "fit"
    with pytest.raises(DiscoveryError) as error:
        discover(script, step="evaluate")
    assert str(error.value) == ("--step evaluate: no loop inside a function evaluate in two.py; functions with loops: "
                                "Trainer.fit, pretrain")
    with pytest.raises(DiscoveryError) as error:
        discover(script, step="trainer_lib:fit")
    assert str(error.value) == ("--step trainer_lib:fit: the function must be in two.py (module two), "
                                "the script that is rewritten")


def test_an_inference_loop_is_found_when_there_is_no_training_loop():
    spec = discover(CORPUS / "inference_buckets.py")
    assert (spec.kind, spec.model, spec.function, spec.line) == ("inference", "model", "serve", 8)
    assert discover(CORPUS / "in_function.py").kind == "train"  # its eval loop under no_grad is not the step


def test_a_training_script_never_gets_its_validation_loop_tuned(tmp_path):
    """A training loop that is not recognised (its update in a function it calls) is said,
    with its line; the no_grad validation loop is not taken as "the inference step" instead."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\ndata = [(torch.randn(2, 4), torch.randn(2, 1))]\n"
        "for x, y in data:\n    loss = nn.functional.mse_loss(model(x), y)\n    loss.backward()\n"
        "    apply_update(model)\n\n"
        "with torch.no_grad():\n    for x, y in data:\n        print(model(x))\n")
    with pytest.raises(DiscoveryError) as error:
        discover(script)
    assert "the loop at line 6 calls backward() but no <optimizer>.step() was recognised" in str(error.value)


@pytest.mark.parametrize("update", ["p.data.add_(p.grad, alpha=-0.1)", "p.data -= 0.1 * p.grad",
                                    "p.sub_(0.1 * p.grad)"])
def test_a_hand_written_update_is_the_step(tmp_path, update):
    """No optimizer object: `for p in model.parameters()` reading p.grad and changing p in
    place is the update (the PyTorch word-language-model and regression examples)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\ndata = [(torch.randn(2, 4), torch.randn(2, 1))]\n"
        "for x, y in data:\n    model.zero_grad()\n    loss = nn.functional.mse_loss(model(x), y)\n    loss.backward()\n"
        f"    with torch.no_grad():\n        for p in model.parameters():\n            {update}\n")
    spec = discover(script)
    assert (spec.optimizer, spec.manual_update, spec.models, spec.line) == ("", 11, ["model"], 6)
    assert "a hand-written update at line 11" in spec.describe()


def test_a_loop_that_trains_through_a_closure_is_named_not_replaced(tmp_path):
    """LBFGS: backward() inside `def closure()` passed to optimizer.step(closure); the test
    loop under no_grad must not be tuned in its place."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\nopt = torch.optim.LBFGS(model.parameters())\n"
        "x, y = torch.randn(2, 4), torch.randn(2, 1)\nfor i in range(3):\n    def closure():\n        opt.zero_grad()\n"
        "        loss = nn.functional.mse_loss(model(x), y)\n        loss.backward()\n        return loss\n"
        "    opt.step(closure)\n    with torch.no_grad():\n        for _ in range(2):\n            print(model(x))\n")
    with pytest.raises(DiscoveryError) as error:
        discover(script)
    assert "the loop at line 7 trains through a closure (line 8" in str(error.value)


@pytest.mark.parametrize("losses, backwards", [
    ("    loss.backward()\n", 1),
    ("    loss.backward()\n    model(x).abs().mean().backward()\n", 2),
    ("    for _ in range(3):\n        model(x).sum().backward()\n", 3),
    ("    for _ in range(1, 3):\n        model(x).sum().backward()\n", 2),
    ("    loss.backward()\n    if x.sum() > 0:\n        model(x).sum().backward()\n", 0),
    ("    for _ in range(n):\n        model(x).sum().backward()\n", 0),
    ("    loss.backward() if x.sum() > 0 else model(x).sum().backward()\n", 0),
])
def test_the_backward_calls_an_iteration_makes_are_counted_where_the_source_fixes_them(tmp_path, losses, backwards):
    """A loop without an optimizer is timed by its backward() calls: an iteration that backs
    two losses is one step, as a full-iteration graph's replay is. Under a condition, or in a
    loop whose length the source does not fix, the count varies: 0."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\nn = 2\ndata = [(torch.randn(2, 4), torch.randn(2, 1))]\n"
        "for x, y in data:\n    model.zero_grad()\n    loss = nn.functional.mse_loss(model(x), y)\n" + losses +
        "    with torch.no_grad():\n        for p in model.parameters():\n            p.add_(p.grad, alpha=-0.1)\n")
    assert discover(script).backwards == backwards


@pytest.mark.parametrize("call", ["scheduler.step(epoch + i / 8)", "scheduler.step(val_loss)",
                                  "lr_sched.step(metric)"])
def test_a_scheduler_given_a_value_is_a_scheduler_not_a_scaler(tmp_path, call):
    """`scheduler.step(epoch + i / iters)` (warm restarts) or `scheduler.step(val_loss)`
    (ReduceLROnPlateau) changes the LR every batch: the optimizer must stay out of a whole-step
    graph, and the value is no optimizer (read as `scaler.step(optimizer)` before: the
    optimizer captured with an LR that changed at every step)."""
    script = tmp_path / "train.py"
    constructor = "CosineAnnealingWarmRestarts(optimizer, T_0=1)" if "epoch" in call else "ReduceLROnPlateau(optimizer)"
    name = call.split(".")[0]
    script.write_text(
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\noptimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
        f"{name} = torch.optim.lr_scheduler.{constructor}\n"
        "data = [(torch.randn(2, 4), torch.randn(2, 1))] * 8\nval_loss = metric = torch.tensor(1.0)\n"
        "for epoch in range(2):\n    for i, (x, y) in enumerate(data):\n        optimizer.zero_grad()\n"
        "        loss = nn.functional.mse_loss(model(x), y)\n        loss.backward()\n        optimizer.step()\n"
        f"        {call}\n")
    spec = discover(script)
    assert (spec.scheduler, spec.scaler, spec.optimizers) == (name, None, ["optimizer"])
    assert any(o.code == f"{name}.step" for o in spec.outside)


def test_an_environments_step_is_no_scaler_step(tmp_path):
    """REINFORCE's ``state, reward, done = env.step(action)`` was read as
    ``scaler.step(optimizer)`` with ``action`` its optimizer, which the loop "built again" at
    every step (the sweep of 2026-11-30d refused both scopes for reasons that were not so)."""
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Env:\n    def step(self, action):\n        return 0, 1.0, False\n\n\n"
        "model = nn.Linear(4, 2)\noptimizer = torch.optim.Adam(model.parameters(), 0.01)\nenv = Env()\n"
        "for episode in range(3):\n    optimizer.zero_grad()\n    logits = model(torch.randn(1, 4))\n"
        "    action = int(logits.argmax())\n    state, reward, done = env.step(action)\n"
        "    loss = -logits[0, action] * reward\n    loss.backward()\n    optimizer.step()\n")
    spec = discover(script)
    assert (spec.scaler, spec.optimizers) == (None, ["optimizer"])


@pytest.mark.parametrize("built", ["ReduceLROnPlateau(optimizer)", "OneCycleLR(optimizer, 0.1, total_steps=16)"])
def test_a_scheduler_class_imported_by_name_is_a_scheduler(tmp_path, built):
    """`from torch.optim.lr_scheduler import ReduceLROnPlateau; plateau = ...; plateau.step(val)`:
    neither the class nor the name said scheduler, and the value was taken for an optimizer
    (patch then refused, naming `val` among "the optimizers")."""
    script = tmp_path / "train.py"
    name = built.split("(")[0]
    step = "plateau.step(val)" if name == "ReduceLROnPlateau" else "plateau.step()"
    script.write_text(
        f"import torch\nfrom torch import nn\nfrom torch.optim.lr_scheduler import {name}\n\n"
        "model = nn.Linear(4, 1)\noptimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
        f"plateau = {built}\ndata = [(torch.randn(2, 4), torch.randn(2, 1))] * 8\nval = torch.tensor(1.0)\n"
        "for x, y in data:\n    optimizer.zero_grad()\n    loss = nn.functional.mse_loss(model(x), y)\n"
        f"    loss.backward()\n    optimizer.step()\n    {step}\n")
    spec = discover(script)
    assert (spec.scheduler, spec.scaler, spec.optimizers) == ("plateau", None, ["optimizer"])


LR_BY_FUNCTION = """import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), 0.1)


def assign_learning_rate(optimizer, new_lr):
    for param_group in optimizer.param_groups:
        param_group["lr"] = new_lr


def cosine_lr(optimizer, base_lr):
    def _lr_adjuster(step):
        assign_learning_rate(optimizer, base_lr / (step + 1))
    return _lr_adjuster


def adjust_learning_rate(optimizer, epoch):
    for group in optimizer.param_groups:
        group["lr"] *= 0.5 if epoch > 2 else 1.0


scheduler = cosine_lr(optimizer, 0.1)
data = [(torch.randn(2, 4), torch.randn(2, 1))] * 8
for step, (x, y) in enumerate(data):
    {call}
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize("call, lr_set", [
    ("scheduler(step)", True),                         # open_clip: a closure a function of the script returns
    ("adjust_learning_rate(optimizer, step)", True),   # MAE: a function that sets it itself
    ("assign_learning_rate(optimizer, 0.1)", True),
    ("print(step)", False),
])
def test_a_learning_rate_set_by_the_scripts_functions_is_set_by_hand(tmp_path, call, lr_set):
    """The LR set through a function of the script changes a Python float each step, as
    `param_group["lr"] = lr` in the loop does: the optimizer stays out of a whole-step graph.
    The schedule's closure is no model (a submodule rewrite once iterated its children)."""
    script = tmp_path / "train.py"
    script.write_text(LR_BY_FUNCTION.format(call=call))
    spec = discover(script)
    assert spec.models == ["model"]
    assert spec.lr_set == (27 if lr_set else None)
    assert any("lr" in o.code or "param_group" in o.reason for o in spec.outside) == lr_set


STEP_IN_A_CALL = """import torch
from torch import nn

model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), 0.1)


class NativeScaler:
    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu", enabled=False)

    def __call__(self, loss, optimizer, parameters=None):
        self._scaler.scale(loss).backward()
        self._scaler.step(optimizer)
        self._scaler.update()


def backward_and_step(loss, opt):
    loss.backward()
    opt.step()


loss_scaler = NativeScaler()
data = [(torch.randn(2, 4), torch.randn(2, 1))] * 8
for x, y in data:
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    {call}
"""


@pytest.mark.parametrize("call, scaler", [
    ("loss_scaler(loss, optimizer, parameters=model.parameters())", "loss_scaler._scaler"),   # timm, MAE, DeiT
    ("backward_and_step(loss, optimizer)", None),
    ("backward_and_step(opt=optimizer, loss=loss)", None),
])
def test_a_backward_and_step_inside_a_call_of_the_scripts_code_make_the_training_loop(tmp_path, call, scaler):
    """timm's train_one_epoch calls `loss_scaler(loss, optimizer, clip_grad=..., parameters=...)`,
    whose __call__ runs the backward and the scaler's step: no training loop was found at all."""
    script = tmp_path / "train.py"
    script.write_text(STEP_IN_A_CALL.format(call=call))
    spec = discover(script)
    assert (spec.line, spec.step_call, spec.optimizers, spec.models, spec.loss, spec.scaler) == (
        25, 28, ["optimizer"], ["model"], "loss", scaler)


TRAINER_CLASS = """import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def train_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad()
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def fit(self, batches):
        for batch in batches:
            loss = self.train_step(batch)
        return loss


class Other:
    def train_step(self, batch):
        return batch

    def run(self, batches):
        for batch in batches:
            self.train_step(batch)


model = nn.Linear(4, 1)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
trainer.fit([(torch.randn(2, 4), torch.randn(2, 1))] * 8)
Other().run([1, 2])
"""


def test_a_trainer_method_that_runs_backward_and_step_makes_its_callers_loop_the_training_loop(tmp_path):
    """A Trainer class's ``fit`` loops over ``self.train_step(batch)`` (sweep f): no training
    loop was found at all, so no scope applied. ``self`` is the class's own object: its
    method, not one of another class of the same name, runs the step."""
    script = tmp_path / "train.py"
    script.write_text(TRAINER_CLASS)
    spec = discover(script)
    assert (spec.line, spec.function, spec.step_call, spec.optimizers, spec.models, spec.loss) == (
        18, "fit", 19, ["self.optimizer"], ["self.model"], "loss")
