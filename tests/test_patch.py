"""Rewrites of the corpus per scope, against golden x.out.py files; the diffs apply with
`git apply` and `patch -p1`, the results compile, refusals are one clear line."""

import copy
import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys
import types
import warnings

import pytest
import torch
from click.testing import CliRunner

from advisor.cli import cli
from advisor.patching import file_digest, tune_result_path
from conftest import ROOT, requires_cuda
from tuner.discover import DiscoveryError, discover
from tuner.patch import NO_ARGUMENT_CHECKS, PATCH_SCOPES, PatchRefused, check, make_patch

CORPUS = ROOT / "tests" / "corpus"
GOLDEN = ROOT / "tests" / "patch_golden"
REFUSALS = json.loads((GOLDEN / "refusals.json").read_text())
CASES = sorted((p.stem, scope) for p in CORPUS.glob("*.py") for scope in PATCH_SCOPES)


@pytest.mark.parametrize("name,scope", CASES)
def test_golden(name, scope):
    source = CORPUS / f"{name}.py"
    key = f"{name}.{scope}"
    if key in REFUSALS:
        with pytest.raises((PatchRefused, DiscoveryError)) as error:
            make_patch(source, scope)
        assert str(error.value) == REFUSALS[key].format(path=source)
        assert not (GOLDEN / f"{key}.out.py").exists()
        return
    patch = make_patch(source, scope)
    assert patch.patched == (GOLDEN / f"{key}.out.py").read_text()
    compile(patch.patched, key, "exec")
    assert patch.original == source.read_text()  # nothing written


@pytest.mark.parametrize("name,scope", [c for c in CASES if f"{c[0]}.{c[1]}" not in REFUSALS])
def test_diff_applies_with_git_and_patch(name, scope, tmp_path):
    source = CORPUS / f"{name}.py"
    diff = make_patch(source, scope).diff(f"{name}.py")
    for tool in (["git", "apply"], ["patch", "-p1", "--quiet"]):
        if shutil.which(tool[0]) is None:
            continue
        work = tmp_path / tool[0]
        work.mkdir()
        shutil.copy(source, work / f"{name}.py")
        subprocess.run(tool, input=diff, text=True, cwd=work, check=True)
        assert (work / f"{name}.py").read_text() == (GOLDEN / f"{name}.{scope}.out.py").read_text()


def test_every_scope_has_a_golden_for_most_styles():
    for scope in PATCH_SCOPES:
        goldens = list(GOLDEN.glob(f"*.{scope}.out.py"))
        # forward: inference loops only; the all-reduce outside the graph: DDP loops only
        assert len(goldens) >= {"forward": 2, "full_iteration_allreduce_outside": 1}.get(scope, 6), scope


def test_full_iteration_moves_logging_out_and_makes_adam_capturable():
    out = (GOLDEN / "in_function.full_iteration.out.py").read_text()
    assert "torch.optim.AdamW(model.parameters(), lr=3e-4, capturable=torch.cuda.is_available())" in out
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert ".item()" not in step and "zero_grad" not in step and step.rstrip().endswith("return loss")
    assert "loss = _cg_step_graph(images, targets)" in out


def test_capturable_is_passed_only_to_the_optimizers_that_take_it(tmp_path):
    """Every class the rewrite builds with ``capturable`` takes it in this torch; Adagrad does
    not (its rewrite failed at its first line on the H200), so its step stays eager after the
    replay and its constructor is left as written."""
    import inspect

    from tuner.patch import CAPTURABLE_OPTIMIZERS

    assert all("capturable" in inspect.signature(getattr(torch.optim, name)).parameters
               for name in CAPTURABLE_OPTIMIZERS)
    script = tmp_path / "adagrad.py"
    script.write_text(INDEXED_LOOP.format(pick="    x, y = features[step], targets[step]", x="x", y="y")
                      .replace("torch.optim.SGD(", "torch.optim.Adagrad("))
    patch = make_patch(script, "full_iteration")
    assert "opt = torch.optim.Adagrad(model.parameters(), lr=0.1)\n" in patch.patched and "capturable=" not in patch.patched
    assert not patch.steps_optimizer_in_graph and "opt.step()" in patch.patched.split("_cg_step_graph(x, y)")[1]


POLICY_LOOP = """
import torch
{imports}
from torch import nn

policy = nn.Linear(8, 4).cuda()
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
states = torch.randn(16, 8).cuda()
for step in range(100):
    dist = {build}
    actions = dist.sample()
    loss = -(dist.log_prob(actions) * actions.float()).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("imports, build", [
    ("from torch.distributions import Categorical", "Categorical(logits=policy(states))"),
    ("import torch.distributions as D", "D.Categorical(logits=policy(states))"),
    ("", "torch.distributions.Normal(policy(states), 1.0, False)"),
    ("from torch.distributions.normal import Normal as N", "N(policy(states), 1.0)"),
    ("from torch import distributions as dists", "dists.Independent(dists.Normal(policy(states), 1.0), 1)"),
    ("from torch.distributions import *", "Categorical(logits=policy(states), validate_args=False)"),
])
def test_a_step_that_builds_distributions_runs_without_their_host_checks(imports, build, tmp_path):
    """A torch.distributions object checks its arguments on the host when built, and
    log_prob its value: a sync, which broke a REINFORCE step's capture on the H200. However the
    script reaches torch.distributions, full_iteration turns the checks' default off before the
    loop, one line, and leaves the calls as written (a value given positionally or through
    **kwargs stays valid); fwd_bwd leaves the loss, and the distribution with it, eager; a loop
    without distributions gets no such line."""
    script = tmp_path / "policy.py"
    script.write_text(POLICY_LOOP.format(imports=imports, build=build))
    patched = make_patch(script, "full_iteration").patched
    setup = patched.split("def _cg_step(")[1].split("for step in range(100):")[0]
    assert f"    dist = {build}\n" in setup
    assert f"\n{NO_ARGUMENT_CHECKS}\n_cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [policy" in setup
    assert "validate_args(False)" not in make_patch(script, "fwd_bwd").patched
    script.write_text(INDEXED_LOOP.format(pick="    x, y = features[step], targets[step]", x="x", y="y"))
    assert "validate_args" not in make_patch(script, "full_iteration").patched


AGENT_LOOP = """
import torch
from torch import nn
{imports}


class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Linear(8, 4)

    def get_action(self, x):
        dist = {build}
        action = dist.sample()
        return action, dist.log_prob(action)


agent = Agent().cuda()
opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
states = torch.randn(16, 8).cuda()
prior = {prior}
for step in range(100):
    action, logprob = agent.get_action(states)
    loss = -(logprob * action.float()).mean() - prior.log_prob(action.float()).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_distributions_built_outside_the_step_run_without_their_host_checks_too(tmp_path):
    """CleanRL's PPO builds its Categorical in the agent's method, and a prior is built before
    the loop: the default is read at each check, so the line before the loop reaches both;
    submodule, whose graphs hold the agent's layers alone, needs no such line."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT_LOOP.format(imports="from torch.distributions import Categorical, Normal",
                                        build="Categorical(logits=self.actor(x))", prior="Normal(0.0, 1.0)"))
    patched = make_patch(script, "full_iteration").patched
    assert "        dist = Categorical(logits=self.actor(x))\n" in patched and "prior = Normal(0.0, 1.0)\n" in patched
    assert patched.index("prior = Normal(") < patched.index(NO_ARGUMENT_CHECKS) < patched.index("for step in range(100)")
    assert "validate_args" not in make_patch(script, "submodule").patched
    code = ("import torch\nprior = torch.distributions.Normal(0.0, 1.0)\n" + NO_ARGUMENT_CHECKS
            + "print(prior._validate_args, torch.distributions.Normal(0.0, 1.0, validate_args=True)._validate_args)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]   # an object built before the line follows it; an explicit True does not


@pytest.mark.parametrize("bases, forward, refused", [
    ("nn.Module", "", True),
    ("nn.Module", "    def forward(self, x):\n        return self.actor(x)\n", False),
    ("Base", "", False),                   # Base (below) defines forward
    ("nn.Sequential", "", False),          # a class from elsewhere may define it
    ("nn.Module", "    if True:\n        def forward(self, x):\n            return self.actor(x)\n", False),
    ("nn.Module", "    forward = nn.Module.__call__\n", False),   # bound some other way than a def
])
def test_fwd_bwd_of_a_model_whose_forward_the_loop_never_runs_is_refused(bases, forward, refused, tmp_path):
    """A graphed forward replaces the model's forward; a loop that only calls another method
    of a class without one (CleanRL's agent.get_action_and_value) would run eagerly as before."""
    source = AGENT_LOOP.format(imports="from torch.distributions import Categorical, Normal",
                               build="Categorical(logits=self.actor(x))", prior="Normal(0.0, 1.0)")
    source = source.replace("class Agent(nn.Module):", "class Base(nn.Module):\n    def forward(self, x):\n"
                            "        return x\n\n\nclass Agent(%s):" % bases)
    source = source.replace("    def get_action(self, x):", forward + "\n    def get_action(self, x):")
    script = tmp_path / "agent.py"
    script.write_text(source)
    if refused:
        with pytest.raises(PatchRefused, match="agent's class, Agent, defines no forward: the loop calls its other "
                                               "methods"):
            make_patch(script, "fwd_bwd")
    else:
        assert "_cg_graph_forward(agent)" in make_patch(script, "fwd_bwd").patched


@pytest.mark.parametrize("imports", ["from torch.distributions import *", "from torch.distributions import Categorical"])
def test_what_a_star_import_binds_is_no_model(imports, tmp_path):
    """A class or function the loop calls that only ``import *`` can have bound
    (``Categorical(logits=...)``, a helper of ``from utils import *``) is not a model the
    script built: graphed or compiled as one, the rewrite replaced a class's forward."""
    script = tmp_path / "policy.py"
    script.write_text(POLICY_LOOP.format(imports=imports, build="Categorical(logits=policy(states))")
                      .replace("    actions = dist.sample()\n", "    actions = mix(dist.sample())\n")
                      .replace("from torch import nn\n", "from torch import nn\nfrom helpers import *\n"))
    assert discover(script).models == ["policy"]
    assert "_cg_graph_forward(policy)  #" in make_patch(script, "fwd_bwd").patched
    assert "_cg_compiled_policy = torch.compile(policy" in make_patch(script, "compile").patched
    assert "[opt], [policy])" in make_patch(script, "full_iteration").patched


def test_a_distribution_that_asks_for_its_host_checks_refuses_full_iteration(tmp_path):
    script = tmp_path / "policy.py"
    script.write_text(POLICY_LOOP.format(imports="", build="torch.distributions.Categorical(logits=policy(states), "
                                                           "validate_args=True)"))
    with pytest.raises(PatchRefused, match=r"line 10: torch.distributions.Categorical\(\.\.\., validate_args=True\) "
                                           r"checks its arguments on the host"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("imports, build, shown", [
    ("", "torch.distributions.Normal(policy(states), 1.0, True)", r"torch.distributions.Normal\(\.\.\., validate_args=True\)"),
    ("from torch.distributions import Categorical\ncheck = True", "Categorical(None, policy(states), check)",
     r"Categorical\(\.\.\., validate_args=check\)"),
    ("import torch.distributions as D", "D.MultivariateNormal(policy(states), torch.eye(4, device='cuda'), None, None, True)",
     r"D.MultivariateNormal\(\.\.\., validate_args=True\)"),
    ("from torch.distributions import Normal as N", "N(policy(states), 1.0, True)", r"N\(\.\.\., validate_args=True\)"),
    ("import torch.distributions as D", "D.Independent(D.Exponential(policy(states).exp(), True), 1)",
     r"D.Exponential\(\.\.\., validate_args=True\)"),
])
def test_a_distribution_that_asks_for_its_host_checks_by_position_refuses_full_iteration(tmp_path, imports, build, shown):
    """validate_args given by position, where torch's signature of the class puts it (the third
    of Normal and Categorical, the fifth of MultivariateNormal, the second of Exponential),
    under whatever name the script imported the class."""
    script = tmp_path / "policy.py"
    script.write_text(POLICY_LOOP.format(imports=imports, build=build))
    with pytest.raises(PatchRefused, match=shown + " checks its arguments on the host, a sync a captured step "):
        make_patch(script, "full_iteration")


def test_a_distribution_built_with_its_checks_outside_the_step_refuses_full_iteration(tmp_path):
    """A prior built before the loop asking for its checks: its ``log_prob`` in the step would
    check on the host whatever the default; the patch cannot tell whether the step uses it."""
    script = tmp_path / "policy.py"
    script.write_text(POLICY_LOOP.format(imports="from torch.distributions import Normal\n"
                                                 "prior = Normal(torch.zeros(4).cuda(), 1.0, validate_args=True)",
                                         build="torch.distributions.Categorical(logits=policy(states))"))
    with pytest.raises(PatchRefused, match=r"line 4: Normal\(\.\.\., validate_args=True\) checks its arguments on the "
                                           r"host, a sync a captured step cannot hold if the step uses it"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("imports, build", [
    ("import torch.distributions as D", "D.MultivariateNormal(policy(states), torch.eye(4, device='cuda'), None, None)"),
    ("", "torch.distributions.Normal(policy(states), 1.0, None)"),   # None: the default, which the rewrite turns off
    ("", "torch.distributions.Normal(policy(states), 1.0, validate_args=None)"),
    ("class Normal:\n    pass", "Normal(policy(states), 1.0, True)"),   # a class of the script's own, no distributions
    ("from torch.distributions import *\nclass Uniform:\n    pass",   # its own Uniform beside torch's classes
     "Categorical(logits=Uniform(policy(states), 1.0, True).logits)"),
])
def test_positional_arguments_that_do_not_ask_for_the_checks_are_left_alone(tmp_path, imports, build):
    script = tmp_path / "policy.py"
    script.write_text(POLICY_LOOP.format(imports=imports, build=build))
    assert "_cg_step_graph" in make_patch(script, "full_iteration").patched


def test_the_table_of_validate_args_places_is_torch_s_own():
    """``VALIDATE_ARGS_POSITION`` read off the installed torch's signatures: every class it
    names, and every distribution class torch has that takes ``validate_args``."""
    import inspect

    distributions = pytest.importorskip("torch.distributions")
    from tuner.patch import VALIDATE_ARGS_POSITION

    found = {}
    for name in dir(distributions):
        cls = getattr(distributions, name)
        if isinstance(cls, type) and issubclass(cls, distributions.Distribution) and cls not in (
                distributions.Distribution, distributions.ExponentialFamily):
            parameters = [p.name for p in inspect.signature(cls).parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            if "validate_args" in parameters:
                found[name] = parameters.index("validate_args")
    assert found == VALIDATE_ARGS_POSITION


def run(*args):
    result = CliRunner().invoke(cli, ["patch", *map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def test_cli_prints_a_diff_and_applies_with_a_backup(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(CORPUS / "basic_for.py", script)
    code, out, _ = run(script, "--scope", "full_iteration")
    assert code == 1 and out.startswith("--- a/") and script.read_text() == (CORPUS / "basic_for.py").read_text()
    code, out, err = run(script, "--scope", "full_iteration", "--apply")
    assert code == 0 and out == ""
    assert script.read_text() == (GOLDEN / "basic_for.full_iteration.out.py").read_text()
    assert (tmp_path / "train.py.orig").read_text() == (CORPUS / "basic_for.py").read_text()
    code, _, err = run(script, "--scope", "compile", "--apply")
    assert code == 2 and err == f"cg-advise: error: {tmp_path / 'train.py.orig'} exists (an earlier patch's backup): move it away first\n"


def test_cli_uses_the_tune_result_and_refuses_a_changed_file(tmp_path):
    script = tmp_path / "train.py"
    shutil.copy(CORPUS / "basic_for.py", script)
    saved = tune_result_path(script)
    saved.write_text(json.dumps({"winner": "fwd_bwd", "sha256": file_digest(script)}))
    code, out, _ = run(script)
    assert code == 1 and "_cg_graph_forward(model)" in out
    script.write_text(script.read_text() + "\n# edited\n")
    code, out, err = run(script)
    assert code == 2 and out == ""
    assert err == f"cg-advise: error: {script} changed since it was tuned (train.py.cg-advise.json): tune again or pass --scope\n"


def test_unrecognised_loop_is_refused_with_the_file_untouched(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text("import torch\nfor i in range(3):\n    print(torch.ones(i).sum())\n")
    code, out, err = run(script, "--scope", "full_iteration", "--apply")
    assert code == 2 and out == ""
    assert err == (f"cg-advise: error: {script}: no training loop (a for/while loop whose body calls <loss>.backward() "
                   "and <optimizer>.step()) and no inference loop (one that calls a model under torch.no_grad() or "
                   "torch.inference_mode()) found; loops seen: for loop at line 2\n")
    assert script.read_text().startswith("import torch\nfor i")


def test_a_training_scope_on_an_inference_loop_is_refused(tmp_path):
    script = tmp_path / "infer.py"
    shutil.copy(CORPUS / "inference_only.py", script)
    code, out, err = run(script, "--scope", "full_iteration", "--apply")
    assert (code, out) == (2, "")
    assert err == (f"cg-advise: error: {script}:6: cannot apply full_iteration: this is an inference loop; "
                   "its scopes are forward, compile\n")
    assert script.read_text() == (CORPUS / "inference_only.py").read_text()


def test_names_picked_inside_a_counted_loop_are_step_inputs():
    """`x, y = inputs[step % 4]` rebinds names every iteration: they must reach the graph
    through its static inputs, or every replay would train on the first batch."""
    out = (GOLDEN / "range_indexed.full_iteration.out.py").read_text()
    assert "def _cg_step(x, y):" in out
    assert "    x, y = inputs[step % 4], targets[step % 4]\n    _cg_step_graph(x, y)\n" in out


NUMBER_LOOP = """
import torch
from torch import nn

model = nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8).cuda()
{before}
for step in range(100):
{body}
    loss = model(x).pow(2).mean() * {factor}
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("before, body, factor, refused", [
    ("", "    weight = min(1.0, step / 50)", "weight", "'weight'"),          # ramped from the counter
    ("", "    pass", "(1 + step)", "'step'"),                                  # the counter itself
    ("warmup = 10", "    beta = max(0.0, 1 - step / warmup) ** 2", "beta", "'beta'"),   # through a constant
    ("", "    weight = 0.5", "weight", None),                                  # a constant bound in the loop
    ("scale = torch.ones(1).cuda()", "    weight = scale * step", "weight", None),   # a tensor: copied in
])
def test_a_python_number_the_loop_changes_and_the_step_reads_refuses_full_iteration(before, body, factor, refused,
                                                                                      tmp_path):
    """The helper compares a step's Python values with the captured ones and runs a step with
    another value eagerly: a number that changes every iteration would make a rewrite that
    never replays (tune: ran-eagerly, the profile: a gain). Refused, naming the number; a
    constant, or a tensor computed from the counter (an input copied into the graph), is not."""
    script = tmp_path / "numbers.py"
    script.write_text(NUMBER_LOOP.format(before=before, body=body, factor=factor))
    if refused is None:
        assert "_cg_step_graph(" in make_patch(script, "full_iteration").diff()
        return
    with pytest.raises(PatchRefused, match=f"{refused} is a Python number the loop changes and the step reads"):
        make_patch(script, "full_iteration")
    assert make_patch(script, "fwd_bwd").diff()   # the graphed model does not read it


INDEXED_LOOP = """
import torch
from torch import nn

model = nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
features = torch.randn(100, 16, 8).cuda()
targets = torch.randn(100, 16, 1).cuda()
for step in range(100):
{pick}
    loss = (model({x}) - {y}).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 10 == 0:
        print(step, loss.item())
"""


def test_a_batch_picked_by_the_counter_inside_the_step_is_picked_before_the_replay(tmp_path):
    """`model(features[step])` (a public loop's usual shape) reads the counter only to pick the
    batch: the pick moves before the replay (`_cg_features = features[step]`), an input copied
    into the graph, as a loop that binds it before the step is patched; the captured step reads
    the picked names alone."""
    script = tmp_path / "indexed.py"
    script.write_text(INDEXED_LOOP.format(pick="    pass", x="features[step]", y="targets[step]"))
    patched = make_patch(script, "full_iteration").patched
    assert ("    _cg_features = features[step]\n    _cg_targets = targets[step]\n"
            "    loss = _cg_step_graph(_cg_features, _cg_targets)") in patched
    step = patched[patched.index("def _cg_step("):patched.index("_cg_step_graph = ")]
    assert "loss = (model(_cg_features) - _cg_targets).pow(2).mean()" in step
    assert not re.search(r"(?<![.\w])step\b", step.split(":", 1)[1])   # the counter stays out of the graph
    script.write_text(INDEXED_LOOP.format(pick="    x, y = features[step], targets[step]", x="x", y="y"))
    assert "_cg_step_graph(x, y)" in make_patch(script, "full_iteration").diff()


def test_a_pick_the_step_may_not_run_stays_in_it_and_is_refused_saying_where_to_bind_it(tmp_path):
    """A pick under a conditional expression may not run at every step: it is not moved, and the
    refusal names it."""
    script = tmp_path / "indexed.py"
    script.write_text(INDEXED_LOOP.format(pick="    pass", x="(features[step] if torch.cuda.is_available() else features[0])",
                                          y="targets[0]"))
    with pytest.raises(PatchRefused, match=re.escape("line 11: the step picks its batch with the loop's counter "
                                                     "(features[step])")):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("before, pick, x, why", [
    ("preds = torch.zeros(100, 16, 8).cuda()", "    preds[step] = features[step] * 2", "preds[step]",
     "the loop writes into it"),                                     # a store: read before, it would miss it
    ("memory = torch.randn(100, 16, 8).cuda()", "    memory.mul_(0.5)", "memory[step] + features[0]",
     "the loop writes into it"),                                     # written in place in the loop
    ("codes = torch.randn(100, 16, 8, device='cuda', requires_grad=True)", "    pass", "codes[step]",
     "it trains"),                                                   # latent codes: the copy would not train
    ("weights = [0.1 * k for k in range(100)]", "    pass", "features[0] * weights[step]",
     "it is not bound here to a tensor on the GPU"),                 # a float: every step eager
    ("scales = torch.linspace(0, 1, 100)", "    pass", "features[0] * scales[step]",
     "it is not bound here to a tensor on the GPU"),                 # a CPU scalar: read at capture
])
def test_a_pick_that_cannot_be_read_before_the_replay_is_refused_saying_why(before, pick, x, why, tmp_path):
    """A pick moves before the replay only where that computes what the loop computed."""
    script = tmp_path / "picked.py"
    source = INDEXED_LOOP.replace("for step in range(100):\n", f"{before}\nfor step in range(100):\n")
    script.write_text(source.format(pick=pick, x=x, y="targets[0]"))
    with pytest.raises(PatchRefused, match=re.escape(why)):
        make_patch(script, "full_iteration")


def test_a_counter_read_beside_a_pick_is_refused_as_a_number():
    """Where the step also reads the counter as a number, the pick is not the whole story."""
    from tuner.dataflow import indexed_by

    import libcst as cst

    both = cst.parse_module("loss = model(features[step]) * step\n").body
    assert indexed_by(both, "step") is None
    alone = cst.parse_module("loss = model(features[step % 4])\n").body
    assert cst.Module([]).code_for_node(indexed_by(alone, "step")) == "features[step % 4]"
    bound = cst.parse_module("features = load()\nloss = model(features[step])\n").body
    assert indexed_by(bound, "step") is None   # a container the step binds is no batch picked from outside


COPY_LOOP = """
import torch
from torch import nn

model = nn.Linear(8, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8).cuda()
for step in range(100):
    out = model(x)
{targets}
    loss = nn.functional.cross_entropy(out, targets)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("targets, refused", [
    ("    targets = torch.arange(16).remainder(4).to(out.device)", True),     # made on the host, then moved
    ("    targets = torch.zeros(16, dtype=torch.long)\n    targets = targets.cuda()", True),   # through a name
    ("    targets = torch.tensor([0, 1, 2, 3] * 4, device=out.device)", True),   # host data copied
    ("    targets = torch.arange(16, device=out.device).remainder(4)", False),   # made on the GPU
])
def test_a_tensor_made_on_the_host_and_copied_to_the_gpu_in_the_step_refuses_full_iteration(targets, refused, tmp_path):
    """A capture cannot copy from pageable host memory: the copy's sync fails it (a SimCLR loss
    building its targets with torch.arange(...).to(device) failed with sync-during-capture on
    the H100, a rewrite patch had printed). Refused, naming the expression; a tensor made on
    the GPU is not."""
    script = tmp_path / "copy.py"
    script.write_text(COPY_LOOP.format(targets=targets))
    if not refused:
        assert "_cg_step_graph(" in make_patch(script, "full_iteration").diff()
        return
    with pytest.raises(PatchRefused, match="copies a tensor made on the host to the GPU inside the step"):
        make_patch(script, "full_iteration")


SPARSE_LOOP = """
import torch
from torch import nn

{setup}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x, adj):
        return {forward}


model = Net().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(16, 8).cuda()
for step in range(100):
    out = model(x, adj)
    loss = {loss}
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

DENSE_ADJ = "adj = torch.eye(16).cuda()"
SPARSE_ADJ = "adj = torch.eye(16).to_sparse().cuda()"


FLAG_LOOP = """import torch
from torch import nn

gen, critic = nn.Linear(8, 8).cuda(), nn.Linear(8, 1).cuda()
opt_g, opt_c = torch.optim.SGD(gen.parameters(), 0.1), torch.optim.SGD(critic.parameters(), 0.1)


def freeze(net, flag):
    for p in net.parameters():
        p.requires_grad = not flag


for step in range(10):
    x = torch.randn(4, 8, device="cuda")
{body}
    fake = gen(x)
    opt_c.zero_grad()
    mixed = (0.5 * x + 0.5 * fake.detach()).requires_grad_(True)
    critic(mixed).sum().backward()
    opt_c.step()
    opt_g.zero_grad()
    critic(fake).mean().backward()
    opt_g.step()
"""


@pytest.mark.parametrize("body, line", [
    ("    freeze(critic, False)", 15),                                       # through a function of the script
    ("    for p in critic.parameters():\n        p.requires_grad_(True)", 16),
    ("    critic.requires_grad_(True)", 15),                                 # the model's own method
    ("    pass", None),   # a gradient penalty's mixed batch made to require grad: a tensor of the step's own
])
def test_a_step_that_freezes_parameters_itself_is_refused_a_whole_step_graph(body, line, tmp_path):
    """pix2pix unfreezes its discriminator at the top of an iteration and freezes it for the
    generator's update: a whole-step graph's warm-up ran the step again from the flags it
    left, and the discriminator's backward had nothing to differentiate. fwd_bwd applies."""
    script = tmp_path / "flags.py"
    script.write_text(FLAG_LOOP.format(body=body))
    if line is None:
        assert "_cg_step_graph(" in make_patch(script, "full_iteration").diff()
        return
    with pytest.raises(PatchRefused, match=f"line {line}: the iteration changes which parameters require grad"):
        make_patch(script, "full_iteration")
    assert make_patch(script, "fwd_bwd").diff()


UNFREEZE_LOOP = """import torch
from torch import nn

backbone, head = nn.Linear(8, 8).cuda(), nn.Linear(8, 2).cuda()
model = nn.Sequential(backbone, head)
opt = torch.optim.SGD(model.parameters(), 0.1)


def freeze(net):
    for p in net.parameters():
        p.requires_grad = False


{before}
for epoch in range(3):
{between}
    for step in range(10):
        x = torch.randn(4, 8, device="cuda")
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
"""


@pytest.mark.parametrize("before, between, line", [
    ("backbone.requires_grad_(False)", "    if epoch == 1:\n        for p in backbone.parameters():\n"
     "            p.requires_grad = True", 18),                                   # a backbone unfrozen after an epoch
    ("", "    model.requires_grad_(epoch > 0)", 16),                              # the compiled model's own method
    ("", "    if epoch == 1:\n        freeze(backbone)", 17),                      # through a function of the script
    ("freeze(backbone)", "    pass", None),                                       # frozen for good, before the loop
])
def test_parameters_frozen_or_unfrozen_after_the_model_is_compiled_refuse_compile(before, between, line, tmp_path):
    """Dynamo replays the graph traced with the flags of its first call (pytorch/pytorch#139476):
    the fine-tuning loop compiled with its backbone frozen trained the head alone on the H100,
    after the backbone was unfrozen. Flags set once before the loop are what compile traces."""
    script = tmp_path / "unfreeze.py"
    script.write_text(UNFREEZE_LOOP.format(before=before, between=between))
    if line is None:
        assert "torch.compile(model" in make_patch(script, "compile").diff()
        return
    with pytest.raises(PatchRefused, match=f"line {line}: the loop changes which parameters require grad after the "
                                           "model is compiled"):
        make_patch(script, "compile")
    assert make_patch(script, "fwd_bwd").diff()


def test_a_step_inside_a_call_of_the_scripts_code_refuses_a_whole_step_graph_only(tmp_path):
    """timm's `loss_scaler(loss, optimizer, ...)` runs the backward and the scaler's step: the
    graphs around the model apply, copying the gradients out (what the call does with them is
    not read); a whole-step graph cannot split that call, and compile has no such copy."""
    script = tmp_path / "timm.py"
    script.write_text(LIVE_OUT.format(body=(
        "def backward_and_step(loss, opt):\n    loss.backward()\n    opt.step()\n\n\n"
        "for x in data:\n    opt.zero_grad()\n    loss = model(x).sum()\n    backward_and_step(loss, opt)\n")))
    with pytest.raises(PatchRefused, match="line 15: the step runs inside backward_and_step\\(\\), which no graph can "
                       "hold: the loop calls the model before the call too"):
        make_patch(script, "full_iteration")
    assert "_cg_graph_forward(model, accumulate=True)" in make_patch(script, "fwd_bwd").diff()
    with pytest.raises(PatchRefused, match="runs inside a call of the script's own code"):
        make_patch(script, "compile")


def test_a_batch_built_sparse_and_made_dense_in_the_loop_is_no_sparse_use(tmp_path):
    script = tmp_path / "dense_batch.py"
    script.write_text(SPARSE_LOOP.format(setup=DENSE_ADJ, forward="adj @ self.lin(x)", loss="out.sum()").replace(
        "    out = model(x, adj)", "    x = torch.sparse_coo_tensor([[0], [0]], [1.0], (16, 8)).to_dense().cuda()\n"
                                  "    out = model(x, adj)"))
    assert "_cg_step_graph(" in make_patch(script, "full_iteration").diff()


@pytest.mark.parametrize("setup, forward, loss, refused", [
    (DENSE_ADJ, "torch.sparse.mm(adj, self.lin(x))", "out.sum()", {"fwd_bwd", "submodule", "full_iteration"}),
    (SPARSE_ADJ, "adj @ self.lin(x)", "out.sum()", {"fwd_bwd", "submodule", "full_iteration"}),   # given to it
    (DENSE_ADJ, "adj @ self.lin(x)", "torch.sparse.sum(out.to_sparse())", {"full_iteration"}),   # the loss alone
    (DENSE_ADJ, "adj @ self.lin(x)", "out.sum()", set()),
    ("adj = torch.eye(16).to_sparse().to_dense().cuda()", "adj @ self.lin(x)", "out.sum()", set()),
    ("adj = torch.eye(16).to_sparse().cuda().to_dense()", "adj @ self.lin(x)", "out.sum()", set()),   # built sparse, bound dense
])
def test_sparse_tensors_in_what_a_graph_holds_refuse_its_scope(setup, forward, loss, refused, tmp_path):
    """Sparse kernels size their outputs from the data: a graph convolutional network's
    torch.sparse.mm made the fwd_bwd and full_iteration rewrites patch printed fail on the H100
    with a device-side assert. A scope whose graphs would hold a sparse operation (in a forward,
    a sparse tensor given to the model, or anywhere in a whole-step graph) is refused, naming
    it; compile, which runs them between its graphs, is not."""
    script = tmp_path / "sparse.py"
    script.write_text(SPARSE_LOOP.format(setup=setup, forward=forward, loss=loss))
    for scope in ("fwd_bwd", "submodule", "full_iteration", "compile"):
        if scope in refused:
            with pytest.raises(PatchRefused, match="use sparse tensors, whose kernels size their outputs"):
                make_patch(script, scope)
        else:
            assert make_patch(script, scope).diff()


def test_compile_of_a_sparse_or_recurrent_model_applies_and_the_run_record_says_what_it_leaves_eager(tmp_path):
    from advisor.runrecord import applied_scopes

    script = ROOT / "tests" / "corpus" / "gcn_full_batch.py"
    assert make_patch(script, "compile").compile_eager == "torch.sparse.mm in a model's forward"
    assert make_patch(ROOT / "tests" / "corpus" / "unet_dice.py", "compile").compile_eager == ""
    assert make_patch(ROOT / "tests" / "corpus" / "lstm_forecaster.py", "compile").compile_eager == (
        "nn.LSTM (TorchDynamo runs RNN modules eagerly)")
    own_rnn = tmp_path / "own_rnn.py"   # a script's own `class RNN` of linear layers: compiled whole
    own_rnn.write_text(HOST_VALUE_LOOP.replace("class Net(", "class RNN(").replace("Net()", "RNN()").format(
        setup="", body="", argument="x"))
    assert make_patch(own_rnn, "compile").compile_eager == ""
    scopes = applied_scopes(script)["scopes"]
    assert scopes["compile"]["eager"] == "torch.sparse.mm in a model's forward"
    assert not scopes["fwd_bwd"]["applies"] and "eager" not in scopes["fwd_bwd"]


HOST_VALUE_LOOP = """
import random
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x, extra):
        return self.lin(x) if extra is None else self.lin(x) * 2

{setup}
model = Net().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(16, 8), None) for _ in range(100)]
for step in range(100):
    x = data[step][0].cuda()
{body}
    out = model(x, {argument})
    loss = out.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("setup, body, argument, given", [
    ("", "    flag = random.random() < 0.5", "flag", "flag"),     # a seq2seq's teacher forcing
    ("", "", "True", "True"),                                      # a literal
    ("", "", "step", "step"),                                      # the loop counter
    ("width = 16", "", "width * 2", "width * 2"),                  # a number constant
    ("", "    mask = torch.ones(16, 4, device='cuda')", "mask", None),   # a tensor
    ("", "", "data[step][1]", None),                               # unknown: may be a tensor
    ("def sample(model):\n    for t in range(10):\n        pass", "    t = torch.randint(0, 10, (16,), device='cuda')",
     "t", None),                                                   # a counter elsewhere, a tensor here
    ("", "    y = (x - 0.5) / 0.5", "y", None),                     # arithmetic on a tensor
    ("def scale(z):\n    z = (z - 0.5) / 0.5\n    return z", "", "x", None),   # a parameter rebound
])
def test_a_model_given_a_python_value_refuses_fwd_bwd(setup, body, argument, given, tmp_path):
    """fwd_bwd's helper takes CUDA tensors only and runs any other call eagerly: a seq2seq model
    given its teacher-forcing flag ran every step eagerly on the H100 (tune: ran-eagerly) where
    the profile had predicted 3.60x. Refused, naming the value; submodule and compile apply."""
    script = tmp_path / "host_value.py"
    script.write_text(HOST_VALUE_LOOP.format(setup=setup, body=body, argument=argument))
    if given is None:
        assert "_cg_graph_forward(model" in make_patch(script, "fwd_bwd").diff()
    else:
        with pytest.raises(PatchRefused, match=re.escape(f"model is given a Python value ({given}); a graphed forward")):
            make_patch(script, "fwd_bwd")
    assert make_patch(script, "submodule").diff() and make_patch(script, "compile").diff()


@requires_cuda
def test_a_graphed_module_called_again_before_its_backward_runs_that_call_eagerly():
    """A seq2seq decoder's GRUCell, run once per output token: its submodule rewrite replayed
    the cell's graph at every call, each replay overwriting what the last one's backward reads,
    and the script ended 0.99 (relative) away from eager on the H100. The helper now sees the
    second call before a backward, runs it (and each call until that backward) eagerly, and warns."""
    from tuner.templates import GRAPHED_FORWARD

    namespace = {"torch": torch}
    exec(GRAPHED_FORWARD, namespace)

    class Unrolled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cell, self.once = torch.nn.GRUCell(8, 8), torch.nn.Linear(8, 8)

        def forward(self, x):
            h = self.once(x)
            for _ in range(3):
                h = self.cell(x, h)
            return h

    torch.manual_seed(0)
    eager = Unrolled().cuda()
    graphed = Unrolled().cuda()
    graphed.load_state_dict(eager.state_dict())
    with pytest.warns(UserWarning, match="GRUCell is called again before the backward of its last call"):
        for child in graphed.children():
            namespace["_cg_graph_forward"](child)
        for _ in range(4):
            x = torch.randn(4, 8, device="cuda")
            for model in (eager, graphed):
                model.zero_grad()
                model(x).square().sum().backward()
            for a, b in zip(eager.parameters(), graphed.parameters()):
                torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-5)


@requires_cuda
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_full_iteration_graph_is_captured_again_when_parameters_are_unfrozen(optimizer):
    """The fine-tuning loop that trains the head, then unfreezes the backbone: a graph captured
    while the backbone was frozen steps the head alone (its backward and its optimizer step skip
    the backbone). The helper captures again, warmed up as at first, and ends where eager does."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).cuda()
    graphed = copy.deepcopy(eager)

    def build(model):
        if optimizer == "sgd":
            return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        return torch.optim.Adam(model.parameters(), lr=1e-2, capturable=True)

    def stepper(model, opt):
        def step(x, y):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eager_opt, graphed_opt = build(eager), build(graphed)
    eager_step = stepper(eager, eager_opt)
    helper = namespace["_CgFullIterationGraph"](stepper(graphed, graphed_opt), [graphed_opt], [graphed])
    x, y = torch.randn(32, 8, device="cuda"), torch.randn(32, 2, device="cuda")
    for step in range(8):
        for model in (eager, graphed):
            model[0].requires_grad_(step >= 3)
        eager_opt.zero_grad()
        eager_step(x, y)
        helper(x, y)
    torch.cuda.synchronize()
    assert helper.graph is not None and helper.trained == [True] * 4
    for a, b in zip(eager.parameters(), graphed.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@requires_cuda
def test_gradients_set_to_none_after_a_replay_are_the_next_replays_again():
    """A step skipped after a non-finite gradient norm (`optimizer.zero_grad(set_to_none=True);
    continue`): the gradients the captured backward writes were cut off from the parameters,
    and every later eager optimizer step found none and trained nothing. The helper hands them
    back after each replay."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).cuda()
    graphed = copy.deepcopy(eager)
    eager_opt, graphed_opt = (torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, graphed))

    def stepper(model, opt):
        def step(x, y):
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        return step

    helper = namespace["_CgFullIterationGraph"](stepper(graphed, graphed_opt), [graphed_opt], [graphed],
                                                 optimizers_in_graph=False)
    x, y = torch.randn(32, 8, device="cuda"), torch.randn(32, 2, device="cuda")
    for step in range(10):
        eager_opt.zero_grad()
        stepper(eager, eager_opt)(x, y)
        helper(x, y)
        if step == 5:   # the step skipped
            eager_opt.zero_grad(set_to_none=True)
            graphed_opt.zero_grad(set_to_none=True)
            continue
        eager_opt.step()
        graphed_opt.step()
    torch.cuda.synchronize()
    for a, b in zip(eager.parameters(), graphed.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        assert b.grad is not None


def _graphed_forward_on_the_cpu():
    """The graphed-forward helper with make_graphed_callables replaced by an autograd Function
    that, like its graphed callables, hands back outputs detached from their computation and
    recomputes in its backward from the inputs of the LAST replay, as a graph's backward reads
    its static buffers, which each replay overwrites (no GPU: the helper's own bookkeeping is
    what is under test)."""
    from torch.utils._pytree import tree_flatten, tree_unflatten

    from tuner.templates import GRAPHED_FORWARD

    def graphed(module, samples, num_warmup_iters=3):
        eager, params = module.forward, [p for p in module.parameters() if p.requires_grad]
        flat_samples, layout = tree_flatten(samples)   # as make_graphed_callables flattens them
        needed = [s.requires_grad for s in flat_samples]   # as captured: the input gradients its backward makes

        class Replay(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *args):
                module.replays += 1
                Replay.static = [a.detach().clone() for a in args[:len(flat_samples)]]
                flat, Replay.spec = tree_flatten(eager(*tree_unflatten(list(Replay.static), layout)))
                # the graph's output buffers, written in place by each replay and handed out as views
                if [o.shape for o in getattr(Replay, "outputs", [])] != [o.shape for o in flat]:
                    Replay.outputs = [o.detach().clone() for o in flat]
                for buffer, o in zip(Replay.outputs, flat):
                    buffer.copy_(o.detach())
                return tuple(o.detach() for o in Replay.outputs)

            @staticmethod
            def backward(ctx, *grads):
                kept = [(b, b.detach().clone()) for b in module.buffers()]   # a graph's backward runs no forward
                with torch.enable_grad():
                    ins = [i.detach().requires_grad_(need) for i, need in zip(Replay.static, needed)]
                    flat, _ = tree_flatten(eager(*tree_unflatten(ins, layout)))
                    wanted = [i for i in ins if i.requires_grad]
                    found = list(torch.autograd.grad(flat, wanted + params, grads, allow_unused=True))
                with torch.no_grad():
                    for buffer, value in kept:
                        buffer.copy_(value)
                made = [found.pop(0) if need else None for need in needed]
                return tuple(made) + tuple(found)

        eager(*samples)   # a warm-up call, as make_graphed_callables makes before its capture
        training = module.training   # as make_graphed_callables: the module's own forward where the flag differs
        module.forward = lambda *a: (tree_unflatten(list(Replay.apply(*tree_flatten(a)[0], *params)), Replay.spec)
                                     if module.training == training else eager(*a))
        module.replays = 0
        return module

    source = GRAPHED_FORWARD.replace("t.is_cuda", "True").replace("torch.cuda.make_graphed_callables(", "graphed(")
    namespace = {"torch": torch, "graphed": graphed}
    exec(source, namespace)
    return namespace["_cg_graph_forward"]


def _helper_state(module) -> dict:
    run = module.forward.run   # the _CgForward the helper installs
    cells = dict(zip(run.__code__.co_freevars, run.__closure__))
    return cells["state"].cell_contents


@pytest.mark.parametrize("loop, warns", [
    ("twice", True),        # called again before its backward (a decoder cell per token)
    ("reduced", True),      # twice, each output reduced at once: D(fake).mean() - D(real).mean()
    ("skipped", True),      # a forward whose backward is skipped, its loss kept to the next call
    ("validation", False),  # a forward with grad whose loss is only read (validation without no_grad)
    ("eval mode", False),   # model.eval() with grad: make_graphed_callables runs the eager forward
    ("once", False),
])
def test_the_graphed_forward_helper_never_replays_before_the_last_replays_backward(loop, warns):
    """Each step's gradients equal an eager twin's: a replay made before the backward of the
    last one would overwrite what that backward reads (the WGAN critic's two calls, each output
    reduced at once, were replayed both: the output's weakref was dead, its backward to come)."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
    module = graph_forward(copy.deepcopy(eager))
    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(5):
            x = torch.randn(4, 8)
            for model in (eager, module):
                model.zero_grad()
                if loop == "twice":
                    (model(x) * model(x + 1)).sum().backward()
                elif loop == "reduced":
                    (model(x).mean() - model(x * 2).square().mean()).backward()
                elif loop == "skipped":
                    model.loss = model(x).sum()   # kept until the next step's call
                    if step % 2 == 0:
                        model.loss.backward()
                elif loop == "validation":
                    model(x).square().mean().item()
                    model(x).sum().backward()
                elif loop == "eval mode":
                    model.eval()
                    model(x).square().mean().item()   # autograd nodes of eager ops: no weak reference
                    model.train()
                    model(x).sum().backward()
                else:
                    model(x).sum().backward()
            seen += [(a.grad, b.grad) for a, b in zip(eager.parameters(), module.parameters())]
    for a, b in seen:
        torch.testing.assert_close(a, b)
    assert any("is called again before the backward of its last call" in str(w.message) for w in caught) is warns


def _assert_same_gradients_as_the_backbone_unfreezes(eager, graphed) -> None:
    """Four steps of both models, the backbone (``model[0]``) frozen for the first two: each
    step's gradients of ``graphed`` are ``eager``'s (none where eager has none)."""
    x = torch.randn(4, 8)
    for step in range(4):
        for model in (eager, graphed):
            model[0].requires_grad_(step >= 2)
            model.zero_grad()
            model(x).square().sum().backward()
        for a, b in zip(eager.parameters(), graphed.parameters()):
            assert (a.grad is None) == (b.grad is None)
            if a.grad is not None:
                torch.testing.assert_close(a.grad, b.grad)


def test_a_graphed_forward_is_captured_again_when_its_parameters_are_unfrozen():
    """Fine-tuning: the backbone frozen while the head trains, then unfrozen. A backward graph
    captured while it was frozen computes no gradient for it: the rewrite trained the head alone
    for the rest of the run. The helper captures again for the parameters trained now."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    graphed = graph_forward(copy.deepcopy(eager))
    _assert_same_gradients_as_the_backbone_unfreezes(eager, graphed)
    assert _helper_state(graphed)["frozen"] == []   # captured again once unfrozen


class _WordModel(torch.nn.Module):
    """The word-language-model example's shape: the LSTM's (h, c) state goes in and comes out."""

    def __init__(self):
        super().__init__()
        self.embed, self.rnn, self.out = torch.nn.Embedding(16, 8), torch.nn.LSTM(8, 8), torch.nn.Linear(8, 16)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.embed(tokens), hidden)
        return self.out(output), hidden


def _word_model_steps(model, device, steps=4):
    """The example's loop (detached state carried over, a hand-written update): the gradients."""
    torch.manual_seed(1)
    hidden = tuple(torch.zeros(1, 4, 8, device=device) for _ in range(2))
    grads = []
    for _ in range(steps):
        tokens = torch.randint(0, 16, (5, 4), device=device)
        model.zero_grad()
        hidden = tuple(h.detach() for h in hidden)
        output, hidden = model(tokens, hidden)
        torch.nn.functional.cross_entropy(output.view(-1, 16), tokens.view(-1)).backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.5)
    return grads


def test_a_model_given_its_state_in_a_tuple_is_graphed():
    """`output, hidden = model(data, hidden)` with an LSTM's (h, c): the helper graphed only
    calls whose arguments were all tensors, so the fwd_bwd rewrite of the word-language-model
    example ran every step eagerly (tune: ran-eagerly) where the profile predicted 2.25x."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = _WordModel()
    graphed = graph_forward(copy.deepcopy(eager))
    for a, b in zip(_word_model_steps(eager, "cpu"), _word_model_steps(graphed, "cpu")):
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y)
    state = _helper_state(graphed)
    assert state["positional"].replays > 0 and len(state["needed"]) == 3


@dataclasses.dataclass
class _Outputs:
    loss: torch.Tensor = None
    logits: torch.Tensor = None
    hidden_states: tuple = None


class _KeywordModel(torch.nn.Module):
    """A Hugging Face model's shape: keyword tensors (labels among them), a flag that is no
    tensor, a dataclass out whose fields may be None."""

    def __init__(self):
        super().__init__()
        self.embed, self.head = torch.nn.Embedding(16, 8), torch.nn.Linear(8, 3)

    def forward(self, input_ids=None, attention_mask=None, labels=None, output_hidden_states=False):
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        logits = self.head(hidden.mean(1))
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return _Outputs(loss, logits, (hidden,) if output_hidden_states else None)


def test_a_model_called_with_keywords_is_graphed_and_its_dataclass_output_rebuilt():
    """`outputs = model(**batch); loss = outputs.loss`: fwd_bwd was refused for every Hugging
    Face loop (keyword arguments). Each call's tensors now go positionally to the graph, the
    output is built again around the replay's tensors, and a call whose non-tensor argument
    differs from the capture's (`output_hidden_states=True`) runs eagerly."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = _KeywordModel()
    graphed = graph_forward(copy.deepcopy(eager))
    for step in range(4):
        batch = {"input_ids": torch.randint(0, 16, (4, 5)), "attention_mask": torch.ones(4, 5),
                 "labels": torch.randint(0, 3, (4,))}
        for model in (eager, graphed):
            model.zero_grad()
            outputs = model(**batch, output_hidden_states=step == 3)
            assert isinstance(outputs, _Outputs) and (outputs.hidden_states is None) == (step != 3)
            outputs.loss.backward()
        for a, b in zip(eager.parameters(), graphed.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
    assert _helper_state(graphed)["positional"].replays == 3   # the fourth call's flag differs: eager


@pytest.mark.parametrize("clone_outputs", [False, True])
def test_outputs_kept_past_the_next_replay_are_copies_where_asked(clone_outputs):
    """A replay hands back views of its graph's output buffers, which the next replay writes:
    `history.append(out.detach())` kept the last step's output N times over. With
    `clone_outputs` (patch asks for it where the loop keeps an output) each is a copy."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = torch.nn.Linear(8, 2)
    graphed = graph_forward(copy.deepcopy(eager), clone_outputs=clone_outputs)
    kept = {eager: [], graphed: []}
    for _ in range(3):
        x = torch.randn(4, 8)
        for model in (eager, graphed):
            out = model(x)
            kept[model].append(out.detach())
            out.sum().backward()
    same = all(torch.allclose(a, b) for a, b in zip(kept[eager], kept[graphed]))
    assert same is clone_outputs


@requires_cuda
@pytest.mark.parametrize("clone_outputs", [False, True])
def test_on_the_gpu_a_kept_output_is_overwritten_by_the_next_replay_unless_copied(clone_outputs):
    from tuner.templates import GRAPHED_FORWARD

    namespace = {"torch": torch}
    exec(GRAPHED_FORWARD, namespace)
    torch.manual_seed(0)
    eager = torch.nn.Linear(8, 2).cuda()
    graphed = namespace["_cg_graph_forward"](copy.deepcopy(eager), clone_outputs=clone_outputs)
    kept = {eager: [], graphed: []}
    for _ in range(5):
        x = torch.randn(4, 8, device="cuda")
        for model in (eager, graphed):
            out = model(x)
            kept[model].append(out.detach())
            out.sum().backward()
    same = all(torch.allclose(a, b, atol=1e-5) for a, b in zip(kept[eager], kept[graphed]))
    assert same is clone_outputs


@pytest.mark.parametrize("body, clones", [
    ("history = []\nfor x in data:\n    opt.zero_grad()\n    out = model(x)\n    history.append(out.detach())\n"
     "    out.sum().backward()\n    opt.step()\n", True),
    ("best = None\nfor x in data:\n    opt.zero_grad()\n    out = model(x)\n    loss = out.sum()\n"
     "    best = out.detach()\n    loss.backward()\n    opt.step()\n", True),
    ("total = 0.0\nfor x in data:\n    opt.zero_grad()\n    out = model(x)\n    loss = out.pow(2).mean()\n"
     "    loss.backward()\n    opt.step()\n    total += loss.item()\n", False),
    ("for x in data:\n    opt.zero_grad()\n    out = model(x)\n    both = torch.cat((x, out.detach()), 1)\n"
     "    (out.sum() + both.sum()).backward()\n    opt.step()\n", False),
])
def test_fwd_bwd_copies_the_outputs_a_loop_keeps(tmp_path, body, clones):
    out = make_patch(_written(tmp_path, body), "fwd_bwd").patched
    assert ("_cg_graph_forward(model, clone_outputs=True)" in out) is clones


class _OneLinear(torch.nn.Module):
    """A module of one Linear(8, n) layer; its forward is each test's."""

    def __init__(self, n=8):
        super().__init__()
        self.lin = torch.nn.Linear(8, n)


def _same_gradients(eager, graphed, x):
    """One step of each module on ``x``: the same gradients."""
    for model in (eager, graphed):
        model.zero_grad()
        model(x).square().sum().backward()
    for a, b in zip(eager.parameters(), graphed.parameters()):
        torch.testing.assert_close(a.grad, b.grad)


def test_the_graphed_forward_helper_keeps_each_submodules_mode():
    """`model.train(); model.bn.eval()` (a frozen BatchNorm): the capture set every submodule
    to the top module's mode, for good, and replayed BatchNorm in training mode."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    eager.train()
    eager[1].eval()
    graphed = graph_forward(copy.deepcopy(eager))
    for _ in range(3):
        _same_gradients(eager, graphed, torch.randn(16, 8))
    assert not graphed[1].training and _helper_state(graphed)["positional"].replays == 3
    torch.testing.assert_close(eager[1].running_mean, graphed[1].running_mean)


def test_the_graphed_forward_helper_captures_again_when_a_layers_mode_changes():
    """mmdetection's norm_eval: ``model.train()`` each epoch, then its BatchNorm layers put
    back in eval once they are frozen. The module's own mode stays the capture's, so the
    graph kept replaying BatchNorm in training mode (the sweep of 2026-11-30c)."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    graphed = graph_forward(copy.deepcopy(eager))
    for epoch in range(3):
        for model in (eager, graphed):
            model.train()
            if epoch >= 1:
                model[1].eval()
        for _ in range(3):
            _same_gradients(eager, graphed, torch.randn(16, 8))
        torch.testing.assert_close(eager[1].running_mean, graphed[1].running_mean)
    state = _helper_state(graphed)
    assert [mode for mode, _, _ in state["modes"]] == [False] and state["positional"].replays == 6   # captured again once

def test_the_graphed_forward_helper_captures_again_when_a_dropout_p_is_annealed():
    """A callback that anneals ``model.drop.p`` between epochs (fastai's shape): a graph holds
    the capture's p as a constant; the helper captures again with the new one."""
    graph_forward = _graphed_forward_on_the_cpu()
    graphed = graph_forward(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 2)))
    for p in (0.5, 0.5, 0.25, 0.25, 0.25):
        graphed[1].p = p
        graphed(torch.randn(4, 8)).sum().backward()
    state = _helper_state(graphed)
    assert state["modes"] == [(True, 0.25, None)] and state["positional"].replays == 3


def test_the_graphed_forward_helper_says_once_when_no_call_matches_its_capture_again():
    """The sweep of 2026-11-30e: a curriculum whose sequences grow every epoch ran eagerly past
    the first length under fwd_bwd, and nothing said so."""
    graph_forward = _graphed_forward_on_the_cpu()
    graphed = graph_forward(torch.nn.Linear(8, 2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 30):
            graphed(torch.randn(n, 8)).sum().backward()
    said = [w for w in caught if "unlike those it was captured with for 20 calls in a row" in str(w.message)]
    assert len(said) == 1 and _helper_state(graphed)["positional"].replays == 1


def test_a_call_given_a_module_or_an_object_runs_eagerly():
    """`decoder(x, embed)`: a graph would hold the module given as a constant and make no
    gradient for its weights (make_graphed_callables differentiates the sample tensors and the
    graphed module's own parameters)."""
    graph_forward = _graphed_forward_on_the_cpu()

    class Decoder(_OneLinear):
        def forward(self, x, embed):
            return self.lin(embed(x))

    torch.manual_seed(0)
    embed = torch.nn.Linear(8, 8)
    decoder = graph_forward(Decoder())
    for _ in range(3):
        embed.zero_grad()
        decoder(torch.randn(4, 8), embed).sum().backward()
        assert embed.weight.grad is not None
    assert "positional" not in _helper_state(decoder)


def test_a_module_whose_output_holds_an_object_runs_eagerly_for_good():
    """An actor-critic's policy returning `(Categorical(logits=...), value)`: every replay would
    hand back the capture's distribution, whose tensors belong to a graph long gone."""
    graph_forward = _graphed_forward_on_the_cpu()

    class Policy(_OneLinear):
        def forward(self, x):
            logits = self.lin(x)
            return torch.distributions.Categorical(logits=logits), logits.sum(-1)

    torch.manual_seed(0)
    eager = Policy(3)
    graphed = graph_forward(copy.deepcopy(eager))
    with pytest.warns(UserWarning, match="Policy runs eagerly: its output holds a Categorical"):
        for _ in range(3):
            x, action = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
            for model in (eager, graphed):
                model.zero_grad()
                dist, value = model(x)
                (-dist.log_prob(action).sum() + value.sum()).backward()
            for a, b in zip(eager.parameters(), graphed.parameters()):
                torch.testing.assert_close(a.grad, b.grad)


@requires_cuda
def test_a_model_given_its_state_in_a_tuple_is_graphed_on_the_gpu():
    from tuner.templates import GRAPHED_FORWARD

    namespace = {"torch": torch}
    exec(GRAPHED_FORWARD, namespace)
    torch.manual_seed(0)
    eager = _WordModel().cuda()
    graphed = namespace["_cg_graph_forward"](copy.deepcopy(eager))
    for a, b in zip(_word_model_steps(eager, "cuda"), _word_model_steps(graphed, "cuda")):
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-5)
    assert "positional" in _helper_state(graphed)


def test_a_graphed_child_is_captured_again_when_its_input_needs_a_gradient():
    """The submodule rewrite of that loop graphs the head alone (the backbone, frozen when the
    children are wrapped, stays eager). Captured while the backbone was frozen, the head's
    backward graph made no gradient for its input: once unfrozen, the backbone got none and the
    script ended 0.90 (relative) away from eager on the H100."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    graphed = copy.deepcopy(eager)
    graphed[0].requires_grad_(False)
    graph_forward(graphed[2])
    _assert_same_gradients_as_the_backbone_unfreezes(eager, graphed)


@pytest.mark.parametrize("template", ["GRAPHED_FORWARD", "GRAPHED_INFERENCE"])
def test_a_graphed_module_pickles_and_copies_as_its_eager_self(tmp_path, template):
    """`torch.save(model, path)` after the loop (a whole-module checkpoint) failed under the
    fwd_bwd and submodule rewrites: the module's forward was a closure, which pickle cannot
    save ("Can't pickle local object '_cg_graph_forward.<locals>.forward'"), at the end of the
    run. A copy (copy.deepcopy, a best model kept) ran the original's forward, its graphs and
    weights. Both now see the module's own eager forward."""
    from tuner import templates

    namespace = {"torch": torch}
    exec(getattr(templates, template), namespace)
    wrap = namespace["_cg_graph_forward" if template == "GRAPHED_FORWARD" else "_cg_graph_inference"]
    torch.manual_seed(0)
    model = wrap(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)))
    x = torch.randn(8, 4)
    copied = copy.deepcopy(model)
    with torch.no_grad():
        copied[0].weight.add_(1.0)
        assert not torch.allclose(copied(x), model(x))   # the copy's own weights
        torch.testing.assert_close(copied(x), copied[2](copied[1](copied[0](x))))
    path = tmp_path / "model.pt"
    torch.save(model, path)
    loaded = torch.load(path, weights_only=False)
    torch.testing.assert_close(loaded(x), model(x))
    assert "_CgForward" not in path.read_bytes().decode("latin-1")   # loads without cg-advise's helper


def test_an_export_traces_the_eager_forward_of_a_graphed_module():
    """`torch.onnx.export(model, ...)` or `torch.jit.trace(model, x)` after the loop: a trace
    through the replay would hold the graphed autograd Function (a PythonOp no exporter takes)
    in place of the model's operations. Traced, the helper runs the eager forward."""
    graph_forward = _graphed_forward_on_the_cpu()
    torch.manual_seed(0)
    module = graph_forward(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))
    x = torch.randn(4, 8)
    module(x).sum().backward()   # captured
    traced = torch.jit.trace(module, x, check_trace=False)
    assert "PythonOp" not in str(traced.inlined_graph) and "aten::linear" in str(traced.inlined_graph)
    torch.testing.assert_close(traced(x), module(x))


def test_a_graphed_module_under_torch_compile_or_export_runs_its_eager_forward(monkeypatch):
    """torch.export (ONNX's default exporter since torch 2.9) and torch.compile trace the
    forward with TorchDynamo: they get the eager operations, not the replay."""
    graph_forward = _graphed_forward_on_the_cpu()
    module = graph_forward(torch.nn.Linear(8, 8))
    x = torch.randn(4, 8)
    module(x).sum().backward()   # captured, and replayed once
    module(x)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    module(x)
    assert _helper_state(module)["positional"].replays == 2


def _count_captures(graph_forward):
    """The stand-in helper, and a list that grows at each capture it makes."""
    captures = []
    namespace = graph_forward.__globals__
    make = namespace["graphed"]
    namespace["graphed"] = lambda *a, **k: captures.append(1) or make(*a, **k)
    return captures


@pytest.mark.parametrize("loop", ["adversarial", "arity"])
def test_calls_that_need_other_gradients_in_turn_capture_once(loop):
    """A module called in one step with an input that needs its gradient and one that does
    not (FGSM: the input's gradient, then the perturbed input), or with one input and then
    two: captured once (with the union of the gradients needed; the other arity eager), never
    at every call."""
    graph_forward = _graphed_forward_on_the_cpu()
    captures = _count_captures(graph_forward)
    torch.manual_seed(0)

    class Pair(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x, y=None):
            return self.lin(x) if y is None else self.lin(x) + self.lin(y)

    eager, graphed = Pair(), None
    graphed = graph_forward(copy.deepcopy(eager))
    x = torch.randn(4, 8)
    for _ in range(5):
        for model in (eager, graphed):
            model.zero_grad()
            if loop == "adversarial":
                probe = x.clone().requires_grad_(True)
                model(probe).sum().backward()
                perturbed = (x + 0.1 * probe.grad.sign()).detach()
                model(perturbed).square().sum().backward()
            else:
                model(x).sum().backward()
                model(x, x + 1).sum().backward()
        for a, b in zip(eager.parameters(), graphed.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
    assert len(captures) == 1


def test_a_saved_or_copied_graphed_module_is_an_ordinary_module_again():
    """Loaded from `torch.save(model)` or copied, a graphed module's forward is its own bound
    method: TorchScript takes it, and a rewrite run again (training resumed from the file)
    graphs it anew, where a mark that travelled with it left it eager for good."""
    import io

    graph_forward = _graphed_forward_on_the_cpu()
    captures = _count_captures(graph_forward)
    model = graph_forward(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))
    x = torch.randn(4, 8)
    model(x).sum().backward()
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    for other in (torch.load(buffer, weights_only=False), copy.deepcopy(model)):
        assert other.forward.__self__ is other
        torch.testing.assert_close(torch.jit.script(other)(x), model(x))
        graph_forward(other)(x).sum().backward()
    assert len(captures) == 3


@pytest.mark.parametrize("strict", [False, True])
def test_torch_export_of_a_graphed_module_holds_its_eager_operations(strict):
    """`torch.export.export` (non-strict by default) read the module's `forward.__code__`,
    which the helper's forward object lacked: the export failed with an AttributeError."""
    graph_forward = _graphed_forward_on_the_cpu()
    model = graph_forward(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))
    x = torch.randn(4, 8)
    model(x).sum().backward()   # captured
    exported = torch.export.export(model, (x,), strict=strict)
    targets = {str(node.target) for node in exported.graph.nodes}
    assert any("linear" in t for t in targets) and any("tanh" in t for t in targets)
    torch.testing.assert_close(exported.module()(x), model(x))


def test_a_module_returning_a_dict_is_watched_through_its_values():
    graph_forward = _graphed_forward_on_the_cpu()

    class Heads(_OneLinear):
        def forward(self, x):
            return {"a": self.lin(x).tanh(), "b": [self.lin(x)]}

    module = graph_forward(Heads())
    x = torch.randn(4, 8)
    with pytest.warns(UserWarning, match="Heads is called again before the backward of its last call"):
        (module(x)["a"] * module(x + 1)["a"]).sum().backward()
    assert _helper_state(module)["done"]


def test_python_bookkeeping_stays_out_of_the_captured_step():
    out = (GOLDEN / "counter_in_step.full_iteration.out.py").read_text()
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert "seen +=" not in step and "scaled = loss * 2" in step
    assert "    seen += x.shape[0]\n    _cg_step_graph(x)\n" in out  # before the step, as in the script


def test_step_picks_the_loop_to_rewrite(tmp_path):
    from test_discover import TWO_LOOPS

    script = tmp_path / "two.py"
    script.write_text(TWO_LOOPS)
    code, out, err = run(script, "--scope", "full_iteration", "--step", "pretrain")
    assert code == 1 and err.endswith("--scope full_iteration --step pretrain --apply`\n")
    changed = [line for line in out.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))]
    assert "+    def _cg_step(x):" in changed and "+        _cg_step_graph(x)" in changed
    assert "+    _cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model])" in changed   # in pretrain
    # Trainer.fit's loop is untouched
    assert not any(line.startswith("-            ") for line in changed)


def test_full_iteration_helper_keeps_the_structure_of_a_batch():
    """Dict and tuple batches (a Hugging Face loop's `model(**batch)`) reach the graph as
    static tensors in the same structure; the layout decides between replay and eager."""
    from collections import namedtuple

    import torch

    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    helper = namespace["_CgFullIterationGraph"]
    Pair = namedtuple("Pair", "x y")
    batch = ({"input_ids": torch.ones(2, 3, dtype=torch.long), "labels": torch.zeros(2)}, Pair(torch.ones(1), 4), "x")
    tensors, layout = helper._flatten(batch)
    assert [tuple(t.shape) for t in tensors] == [(2, 3), (2,), (1,)]
    rebuilt = helper._unflatten(layout, iter([t * 2 for t in tensors]))
    assert type(rebuilt[1]) is Pair and rebuilt[1].y == 4 and rebuilt[2] == "x"
    assert list(rebuilt[0]) == ["input_ids", "labels"] and torch.equal(rebuilt[0]["input_ids"], 2 * batch[0]["input_ids"])
    shorter = ({"input_ids": torch.ones(1, 3, dtype=torch.long), "labels": torch.zeros(1)}, Pair(torch.ones(1), 4), "x")
    assert helper._flatten(shorter)[1] != layout                       # a last, smaller batch runs eagerly
    assert helper._flatten((batch[0], Pair(torch.ones(1), 5), "x"))[1] != layout  # so does another int
    assert helper._flatten(tuple(batch))[1] == layout



@pytest.mark.parametrize("make, first", [
    (lambda p: torch.optim.NAdam(p, lr=0.01), {"mu_product": 1.0, "step": 0.0, "exp_avg": 0.0}),
    (lambda p: torch.optim.ASGD(p, lr=0.02), {"mu": 1.0, "eta": 0.02, "ax": 0.0, "step": 0.0}),
    (lambda p: torch.optim.Rprop(p, lr=0.03), {"step_size": 0.03, "prev": 0.0}),
    (lambda p: torch.optim.AdamW(p, lr=0.04), {"exp_avg": 0.0, "exp_avg_sq": 0.0, "step": 0.0}),
    (lambda p: torch.optim.ASGD(p, lr=torch.tensor([0.05])), {"eta": 0.05, "mu": 1.0}),   # an lr tensor
])
def test_full_iteration_helper_starts_warm_up_state_where_a_first_step_starts_it(make, first):
    """The helper's warm-up steps make the optimizer state the graph captures; after them it goes
    back to where the optimizer's own first step starts it. Zero for most, but not a NAdam's
    mu_product (a product: at zero it zeroes the bias correction and the graph trains another
    model), ASGD's mu and eta, Rprop's step sizes. What existed before the warm-up gets its
    saved value back."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    model = torch.nn.Linear(3, 2)
    optimizer = make(model.parameters())
    helper = namespace["_CgFullIterationGraph"](lambda: None, [optimizer], [model])
    saved = helper._snapshot()                                  # before any state exists
    for _ in range(3):                                          # the warm-up
        model(torch.randn(4, 3)).sum().backward()
        optimizer.step()
    helper._restore(saved)
    for state in optimizer.state.values():
        for key, value in first.items():
            assert torch.all(state[key] == value), (key, state[key])
    for state in optimizer.state.values():                    # state from before: kept as it was
        for value in state.values():
            value.add_(0.5)
    before = {k: v.clone() for k, v in optimizer.state[model.weight].items()}
    helper._restore(helper._snapshot())
    assert all(torch.equal(before[k], v) for k, v in optimizer.state[model.weight].items())


def test_full_iteration_helper_starts_a_complex_rprop_and_a_wrapped_nadam_where_their_first_step_does():
    """Rprop steps a complex parameter's real and imaginary parts apart, each from lr; a NAdam
    behind a wrapper (accelerate's AcceleratedOptimizer keeps it as .optimizer) is still a NAdam."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    weight = torch.nn.Parameter(torch.randn(3, dtype=torch.complex64))
    rprop = torch.optim.Rprop([weight], lr=0.03)
    nadam = torch.optim.NAdam([torch.nn.Parameter(torch.randn(3))], lr=0.01)
    wrapped = types.SimpleNamespace(optimizer=nadam, param_groups=nadam.param_groups, state=nadam.state)
    helper = namespace["_CgFullIterationGraph"](lambda: None, [rprop, wrapped])
    saved = helper._snapshot()
    for _ in range(2):
        (weight.abs() ** 2).sum().backward()
        rprop.step()
        nadam.param_groups[0]["params"][0].sum().backward()
        nadam.step()
    helper._restore(saved)
    assert torch.all(rprop.state[weight]["step_size"] == complex(0.03, 0.03))
    assert all(float(s["mu_product"]) == 1.0 for s in nadam.state.values())


def test_full_iteration_helper_captures_again_when_a_scheduler_changes_the_learning_rate():
    """A captured optimizer step holds its param groups' settings as constants: a scheduler
    stepped once an epoch, outside the captured loop, would otherwise leave the graph on the
    first epoch's learning rate. The helper compares the settings before each replay and
    captures again when they changed; when they change within a few replays of a capture twice
    in a row, the steps run eagerly from then on. (Here ``graph`` stands for a capture and the
    settings are taken as the capture takes them: this runs on the CPU.)"""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    helper = namespace["_CgFullIterationGraph"](lambda: None, [optimizer], [model])

    def captured(replays):
        helper.graph, helper.settings, helper.host_settings, helper.replays = "captured", helper._settings(), [], replays

    captured(25)
    assert helper._same_settings()
    scheduler.step()                                     # the epoch's end
    assert not helper._same_settings()
    helper._settings_changed()
    assert helper.graph is None and not helper.eager     # the next call captures with lr 0.05
    captured(3)
    optimizer.param_groups[0]["lr"] = 0.01               # once within a few replays: captured again
    helper._settings_changed()
    assert not helper.eager
    captured(3)
    optimizer.param_groups[0]["lr"] = 0.02               # and again: eager from here on
    with pytest.warns(UserWarning, match="change every few steps"):
        helper._settings_changed()
    assert helper.eager
    lr = torch.tensor(0.1, device="meta")                # a device tensor is read in place by the replay
    optimizer.param_groups[0]["lr"] = lr
    captured(25)
    lr.fill_(0.2)
    assert helper._same_settings()
    optimizer.param_groups[0]["betas"] = (torch.ones(2), torch.ones(2))   # replaced: a change, compared safely
    assert not helper._same_settings()
    on_host = torch.tensor(0.1)                          # a CPU tensor is read at capture: by value
    captured(25)
    helper.host_settings = [(on_host, float(on_host))]
    on_host.fill_(0.05)
    assert not helper._same_settings()


HOST_CALLS = """import torch
import wandb
from torch import nn

model = nn.Linear(4, 1).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(8, 4, device="cuda"), torch.randn(8, 1, device="cuda")
for step in range(100):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    wandb.log({"loss": loss})
    torch.cuda.synchronize()
    optimizer.step()
"""


def test_discovery_and_the_rewrite_agree_on_host_calls(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(HOST_CALLS)
    assert [(o.line, o.code) for o in discover(script).outside] == [(12, "wandb.log"), (13, "torch.cuda.synchronize")]
    out = make_patch(script, "full_iteration").patched
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert "wandb" not in step and "synchronize" not in step
    replay = out.index("_cg_step_graph(")
    assert replay < out.index('    wandb.log({"loss": loss})') and replay < out.index("    torch.cuda.synchronize()")


@pytest.mark.parametrize("kept, copies", [
    ("history.append(loss.detach())", True),
    ("history.append((step, loss))", True),
    ("best = loss", True),
    ("record = {'loss': loss.data}", True),
    ("total += loss", False),
    ("print(loss.item())", False),
])
def test_outputs_kept_past_the_next_replay_are_copied(tmp_path, kept, copies):
    script = tmp_path / "train.py"
    script.write_text(HOST_CALLS.replace("    wandb.log({\"loss\": loss})\n    torch.cuda.synchronize()\n", "")
                      .replace("    optimizer.step()\n", f"    optimizer.step()\n    {kept}\n"))
    out = make_patch(script, "full_iteration").patched
    assert ("[model], clone_outputs=True)" in out) == copies
    assert "loss = _cg_step_graph()  # cg-advise" in out


@pytest.mark.parametrize("name,scope", [c for c in CASES if f"{c[0]}.{c[1]}" not in REFUSALS])
def test_every_corpus_rewrite_passes_the_static_check(name, scope):
    """No golden leaves a name unbound that the script bound (pyflakes on both)."""
    source = CORPUS / f"{name}.py"
    check(source, source.read_text(), (GOLDEN / f"{name}.{scope}.out.py").read_text())


def test_a_rewrite_that_drops_a_binding_is_refused_with_the_name():
    source = CORPUS / "loss_after_loop.py"
    golden = (GOLDEN / "loss_after_loop.full_iteration.out.py").read_text()
    broken = golden.replace("    loss, prediction = _cg_step_graph(x, y)", "    prediction = _cg_step_graph(x, y)")
    assert broken != golden
    line = broken.splitlines().index('print(f"final loss {loss.item():.6f}")') + 1
    with pytest.raises(PatchRefused) as error:
        check(source, source.read_text(), broken)
    assert str(error.value) == (f"{source}: the rewrite would leave 'loss' unbound at line {line}; "
                                "refusing it (please report this)")


LIVE_OUT = """import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(2, 4) for _ in range(3)]
{body}"""


@pytest.mark.parametrize("body, replay", [
    # read after the loop: print, f-string, an attribute of an outputs object
    ("for x in data:\n    opt.zero_grad()\n    out = model(x)\n    loss = out.pow(2).mean()\n    loss.backward()\n"
     "    opt.step()\nprint(f'{loss.item()}', out.shape)\n", "loss, out = _cg_step_graph(x)"),
    # returned from the function
    ("def train(steps):\n    for x in data:\n        opt.zero_grad()\n        loss = model(x).pow(2).mean()\n"
     "        loss.backward()\n        opt.step()\n    return loss\n", "loss = _cg_step_graph(x)"),
    # read by the next iteration: the while condition, the body before the step
    ("loss = torch.ones(())\nwhile loss > 0.5:\n    x = data[0]\n    opt.zero_grad()\n"
     "    loss = model(x).pow(2).mean()\n    loss.backward()\n    opt.step()\n", "loss = _cg_step_graph(x)"),
    ("prev = None\nfor x in data:\n    if prev is not None:\n        print(prev)\n    logits = model(x)\n"
     "    loss = logits.mean()\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    prev = logits.sum()\n",
     "logits = _cg_step_graph(x)"),
    # an outer loop's later code
    ("for epoch in range(2):\n    for x in data:\n        opt.zero_grad()\n        loss = model(x).pow(2).mean()\n"
     "        loss.backward()\n        opt.step()\n    print(epoch, loss)\n", "loss = _cg_step_graph(x)"),
])
def test_names_the_step_binds_and_code_reads_later_come_back(tmp_path, body, replay):
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=body))
    out = make_patch(script, "full_iteration").patched
    assert f"{replay}  # cg-advise" in out


def test_the_step_starts_where_its_data_flow_starts(tmp_path):
    """Forward before zero_grad, an optimizer over a parameter list (no model known): the
    forward is still captured (an input outside the graph would be detached: no gradient),
    and the batch moved to the device stays outside as the step's input."""
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=(
        "params = list(model.parameters())\nopt = torch.optim.SGD(params, lr=0.1)\nfor x in data:\n"
        "    x = x.to('cpu')\n    logits = model(x)\n    loss = logits.pow(2).mean()\n"
        "    opt.zero_grad(set_to_none=False)\n    loss.backward()\n    opt.step()\n")))
    out = make_patch(script, "full_iteration").patched
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert step.startswith("def _cg_step(x):") and "logits = model(x)" in step and "zero_grad" not in step
    assert "    x = x.to('cpu')\n    _cg_step_graph(x)\n" in out


def test_state_carried_to_the_next_iteration_goes_in_and_comes_back(tmp_path):
    """An RNN's hidden state: read by the step before it binds it; the replay takes this
    iteration's value as an input and hands the new one back."""
    out = _patched(tmp_path, "h = torch.zeros(2, 1)\nfor x in data:\n    opt.zero_grad()\n    h = model(x) + h.detach()\n"
                             "    h.sum().backward()\n    opt.step()\n")
    assert "def _cg_step(x, h):" in out and "    h = _cg_step_graph(x, h)  # cg-advise" in out


@pytest.mark.parametrize("body, why", [
    ("import time\nfor x in data:\n    opt.zero_grad()\n    loss = model(x).sum()\n    stamp = time.time()\n"
     "    loss.backward()\n    opt.step()\nprint(stamp)\n",
     "line 11: 'stamp' is read after the step but holds a Python value (time.time())"),
])
def test_what_a_graph_cannot_hand_back_is_refused_by_name(tmp_path, body, why):
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=body))
    with pytest.raises(PatchRefused) as error:
        make_patch(script, "full_iteration")
    assert why in str(error.value)


def _printed_numbers(text: str) -> list:
    return [float(n) for n in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", text)]


@pytest.mark.parametrize("name,scope", [("loss_after_loop", "full_iteration"), ("hf_outputs", "full_iteration"),
                                        ("eval_in_epoch", "fwd_bwd"),
                                        ("return_loss", "full_iteration"), ("ema_update", "submodule"),
                                        ("batch_picked_in_step", "full_iteration"), ("policy_gradient", "full_iteration"),
                                        ("ppo_agent_method", "full_iteration")])
def test_a_patched_script_runs_on_the_cpu_as_the_original_did(tmp_path, name, scope):
    """A script with a CPU fallback still runs where it ran: the helpers run the step eagerly
    when its tensors are not on a GPU, and print what the original prints."""
    pytest.importorskip("torch")
    env = dict(os.environ, CG_STEPS="12", CUDA_VISIBLE_DEVICES="")
    patched = tmp_path / f"{name}.py"
    patched.write_text(make_patch(CORPUS / f"{name}.py", scope).patched)
    outputs = [subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=120)
               for path in (CORPUS / f"{name}.py", patched)]
    assert [o.returncode for o in outputs] == [0, 0], outputs[1].stderr
    original, rewritten = (_printed_numbers(o.stdout) for o in outputs)
    assert original and rewritten == pytest.approx(original, rel=1e-5, abs=1e-6)


def test_gradients_zeroed_in_place_are_copied_out_of_the_graphed_backward():
    """`zero_grad(set_to_none=False)` would zero the graph's own gradient buffer, which .grad
    then is, and the next backward would add it to itself (doubled gradients on the GPU)."""
    for scope in ("fwd_bwd", "submodule"):
        assert "accumulate=True" in (GOLDEN / f"zero_grad_after_step.{scope}.out.py").read_text()
        assert "accumulate=True" not in (GOLDEN / f"loss_after_loop.{scope}.out.py").read_text()


def _written(tmp_path, body):
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=body))
    return script


def _patched(tmp_path, body, scope="full_iteration"):
    return make_patch(_written(tmp_path, body), scope).patched


def test_a_batch_fetched_after_the_step_is_the_next_replays_input(tmp_path):
    """`x = next_batch()` at the end of the body: the step reads x, so x is an input of every
    replay (the graph once baked the first batch in and replayed it forever)."""
    out = _patched(tmp_path, "x = data[0]\nfor i in range(3):\n    loss = model(x).sum()\n    loss.backward()\n"
                             "    opt.step()\n    opt.zero_grad()\n    x = data[i % 3]\n")
    assert "def _cg_step(x):" in out and "    _cg_step_graph(x)\n    opt.zero_grad()\n    x = data[i % 3]\n" in out


def test_a_step_skipped_on_its_gradient_norm_keeps_the_optimizer_eager(tmp_path):
    """`if not torch.isfinite(norm): opt.zero_grad(set_to_none=True); continue` between the
    backward and the step: the rewrite once put the `continue` inside the captured function
    (a file that does not compile); the graph now ends at the backward and the check, the
    skip and the optimizer step run after each replay."""
    out = _patched(tmp_path, "for x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
                             "    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
                             "    if not torch.isfinite(norm):\n        opt.zero_grad(set_to_none=True)\n        continue\n"
                             "    opt.step()\n    opt.zero_grad()\n")
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert "continue" not in step and "clip_grad_norm_" not in step and "opt.step()" not in step
    assert "optimizers_in_graph=False" in out and "        continue\n    opt.step()\n" in out


@pytest.mark.parametrize("jump", ["continue", "break"])
def test_a_step_that_may_end_before_its_backward_is_refused_a_whole_step_graph(jump, tmp_path):
    with pytest.raises(PatchRefused, match=f"line 10: the step may end early \\({jump}\\) on a value it computes"):
        _patched(tmp_path, "for x in data:\n    loss = model(x).sum()\n    if torch.isnan(loss):\n"
                           f"        {jump}\n    loss.backward()\n    opt.step()\n    opt.zero_grad()\n")


def test_a_prefetch_inside_the_step_moves_after_the_replay(tmp_path):
    out = _patched(tmp_path, "x = data[0]\nfor i in range(3):\n    loss = model(x).sum()\n    x = data[i % 3]\n"
                             "    loss.backward()\n    opt.step()\n")
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert step.startswith("def _cg_step(x):") and "data[" not in step
    assert "    _cg_step_graph(x)\n    x = data[i % 3]\n" in out


def test_host_data_read_inside_the_captured_step_is_refused(tmp_path):
    """`next(it)` inside a micro-step loop would run once, at capture: every replay would train
    on the first batches."""
    with pytest.raises(PatchRefused) as error:
        _patched(tmp_path, "it = iter(data * 8)\nfor step in range(3):\n    for micro in range(4):\n"
                           "        x = next(it)\n        (model(x).sum() / 4).backward()\n    opt.step()\n"
                           "    opt.zero_grad()\n")
    assert "line 10: next reads host data inside the step" in str(error.value)


def test_micro_steps_make_the_graphed_backward_accumulate(tmp_path):
    out = _patched(tmp_path, "for step in range(3):\n    for micro in range(4):\n        x = data[micro % 3]\n"
                             "        (model(x).sum() / 4).backward()\n    opt.step()\n    opt.zero_grad()\n",
                   scope="fwd_bwd")
    assert "_cg_graph_forward(model, accumulate=True)" in out


def test_names_the_loop_binds_are_never_models(tmp_path):
    """`for callback in callbacks: callback(self)` is called with grad, but is no model."""
    out = _patched(tmp_path, "callbacks = [print]\nfor x in data:\n    loss = model(x).sum()\n    loss.backward()\n"
                             "    opt.step()\n    for callback in callbacks:\n        callback(loss)\n", scope="compile")
    assert "_cg_compiled_model = torch.compile(model" in out and "callback)" not in out.split("for x in data")[0]


def test_a_learning_rate_set_by_hand_keeps_the_optimizer_eager(tmp_path):
    """`group['lr'] = lr` in the loop changes a Python float that a captured step would bake in."""
    out = _patched(tmp_path, "for i, x in enumerate(data):\n    for group in opt.param_groups:\n"
                             "        group['lr'] = 0.1 / (i + 1)\n    loss = model(x).sum()\n    loss.backward()\n"
                             "    opt.step()\n    opt.zero_grad()\n")
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert "opt.step()" not in step and "    _cg_step_graph(x)\n    opt.step()\n" in out


def test_compile_calls_an_alias_and_never_rebinds_the_model(tmp_path):
    out = _patched(tmp_path, "def train():\n    model.train()\n    for x in data:\n        loss = model(x).sum()\n"
                             "        loss.backward()\n        opt.step()\n", scope="compile")
    assert "    _cg_compiled_model = torch.compile(model, mode=\"reduce-overhead\")" in out
    assert "loss = _cg_compiled_model(x).sum()" in out and "\n    model = " not in out


def test_a_python_objects_method_call_in_the_step_runs_after_the_replay(tmp_path):
    """The ImageNet example's `top1.update(acc1[0], n)` between forward and backward: in the
    graph it would run once, at capture, and the meter would freeze."""
    out = _patched(tmp_path, "class Meter:\n    def update(self, v, n):\n        self.v = v\n\n\nmeter = Meter()\n"
                             "for x in data:\n    out = model(x)\n    meter.update(out.mean(), x.size(0))\n"
                             "    out.sum().backward()\n    opt.step()\n")
    step = out[out.index("def _cg_step("):out.index("_cg_step_graph = ")]
    assert "meter.update" not in step and "    out = _cg_step_graph(x)  # cg-advise: replays the captured step\n" \
                                          "    meter.update(out.mean(), x.size(0))\n" in out


def test_state_carried_but_bound_only_under_an_if_is_refused(tmp_path):
    """The word-language-model example binds `hidden` only for RNN models: passing it to every
    replay would raise UnboundLocalError for a Transformer."""
    with pytest.raises(PatchRefused) as error:
        _patched(tmp_path, "rnn = True\nif rnn:\n    h = torch.zeros(2, 1)\nfor x in data:\n    opt.zero_grad()\n"
                           "    h = model(x) + h.detach()\n    h.sum().backward()\n    opt.step()\n")
    assert "the step carries 'h' from one iteration to the next, but 'h' is not bound before the loop" in str(error.value)


def test_an_attribute_the_step_sets_is_set_again_from_each_replay(tmp_path):
    out = _patched(tmp_path, "class T:\n    pass\n\n\nt = T()\nfor x in data:\n    t.loss = model(x).sum()\n"
                             "    t.loss.backward()\n    opt.step()\n")
    assert "    return t.loss\n" in out and "    t.loss = _cg_step_graph(x)  # cg-advise" in out


def test_an_autocast_context_built_before_the_loop_does_not_cache(tmp_path):
    """nanoGPT's `ctx = torch.amp.autocast(...)` then `with ctx:`: make_graphed_callables
    refuses an autocast that caches casts."""
    out = _patched(tmp_path, "ctx = torch.autocast('cpu')\nfor x in data:\n    with ctx:\n        loss = model(x).sum()\n"
                             "    loss.backward()\n    opt.step()\n", scope="fwd_bwd")
    assert "ctx = torch.autocast('cpu', cache_enabled=False)" in out


def test_state_carried_and_bound_under_an_if_in_a_function_starts_as_none(tmp_path):
    """In a function the name is bound to None at its start, so the replay's argument exists
    on the path that never binds it, and the original binding still wins on the other."""
    out = _patched(tmp_path, "def train(rnn):\n    if rnn:\n        h = torch.zeros(2, 1)\n    for x in data:\n"
                             "        opt.zero_grad()\n        if rnn:\n            h = model(x) + h.detach()\n"
                             "            h.sum().backward()\n        else:\n            model(x).sum().backward()\n"
                             "        opt.step()\n")
    assert out.index("    h = None  # cg-advise") < out.index("        h = torch.zeros(2, 1)")
    assert "        h = _cg_step_graph(x, h)  # cg-advise" in out


def test_a_loss_scaler_that_steps_every_few_calls_accumulates(tmp_path):
    """MAE's `loss_scaler(loss, optimizer, update_grad=(i + 1) % accum_iter == 0)`: its step is
    under an `if` (gradient accumulation), so the graphed backward's gradients must be copied
    out of the buffer the next replay overwrites, and no whole-step graph applies."""
    script = tmp_path / "mae.py"
    script.write_text(LIVE_OUT.format(body=(
        "class NativeScaler:\n    def __call__(self, loss, optimizer, update_grad=True):\n        loss.backward()\n"
        "        if update_grad:\n            optimizer.step()\n\n\nloss_scaler = NativeScaler()\n"
        "for i, x in enumerate(data):\n    loss = model(x).sum() / 2\n"
        "    loss_scaler(loss, opt, update_grad=(i + 1) % 2 == 0)\n    if (i + 1) % 2 == 0:\n        opt.zero_grad()\n")))
    assert "_cg_graph_forward(model, accumulate=True)" in make_patch(script, "fwd_bwd").diff()
    with pytest.raises(PatchRefused, match="the optimizer step runs inside a call"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("body, refused", [
    # gradient accumulation through `continue`: the skip keeps the gradients
    ("for i, x in enumerate(data):\n    (model(x).sum() / 2).backward()\n    if (i + 1) % 2 != 0:\n        continue\n"
     "    opt.step()\n    opt.zero_grad()\n", "line 10: the iteration skips the optimizer step and keeps its gradients"),
    # a host read that skips the step, moved after the replay, would be lost
    ("for x in data:\n    loss = model(x).sum()\n    if loss.item() > 100:\n        continue\n    loss.backward()\n"
     "    opt.step()\n    opt.zero_grad()\n", "line 10: the step may end early \\(continue\\)"),
    # a continue of the statement's own loop (a weighted sum of losses) leaves nothing early
    ("for x in data:\n    opt.zero_grad()\n    out = model(x)\n    loss = out.sum() * 0\n    for k, v in {'a': out.sum()}.items():\n"
     "        if k == 'b':\n            continue\n        loss = loss + v\n    loss.backward()\n    opt.step()\n", None),
    # neither does a function defined in the body and its return
    ("for x in data:\n    opt.zero_grad()\n    def total(o):\n        return o.sum()\n    loss = total(model(x))\n"
     "    loss.backward()\n    opt.step()\n", None),
])
def test_what_leaves_an_iteration_early_and_what_does_not(body, refused, tmp_path):
    """Found by review: accumulation through `continue` once got a whole-step graph that wrote
    the gradients afresh (only the last micro-batch's counted, 0.14 apart on the CPU); a loop
    over losses with its own `continue`, and a `def` in the body, were refused."""
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=body))
    if refused is None:
        assert "_cg_step_graph(" in make_patch(script, "full_iteration").diff()
    else:
        with pytest.raises(PatchRefused, match=refused):
            make_patch(script, "full_iteration")


STEP_IN_A_HELPER = """import torch
from torch import nn

G, D = nn.Linear(2, 4), nn.Linear(4, 1)
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
data = [torch.randn(8, 4) for _ in range(3)]


def train_critic(real):
    opt_d.zero_grad({zeroing})
    fake = G(torch.randn(real.size(0), 2)).detach()
    loss_d = D(fake).mean() - D(real).mean()
    loss_d.backward()
    opt_d.step()


for real in data:
    {loop}
"""


@pytest.mark.parametrize("zeroing", ["", "set_to_none=False"])
def test_a_step_made_in_a_helper_copies_gradients_and_leaves_a_model_it_calls_twice_eager(zeroing, tmp_path):
    """Found by review: a loop whose backward and step run in a function of the script was
    rewritten from what the loop body alone shows: gradients zeroed in place there, or a model
    called twice there (a critic), were missed (0.18 and 5e-3 apart, emulated on the CPU)."""
    script = tmp_path / "critic.py"
    script.write_text(STEP_IN_A_HELPER.format(zeroing=zeroing, loop="train_critic(real)"))
    diff = make_patch(script, "fwd_bwd").diff()
    assert "_cg_graph_forward(G, accumulate=True)" in diff and "_cg_graph_forward(D" not in diff
    with pytest.raises(PatchRefused, match="cannot apply compile"):
        make_patch(script, "compile")


def test_a_training_loop_that_steps_itself_wins_over_a_loop_of_a_stepping_helper(tmp_path):
    """A WGAN's `for _ in range(5): train_critic(real)` inside its training loop: the inner
    loop, shorter, was picked once loops of stepping helpers counted."""
    script = tmp_path / "wgan.py"
    script.write_text(STEP_IN_A_HELPER.format(zeroing="", loop=(
        "for _ in range(5):\n        train_critic(real)\n    opt_g.zero_grad()\n    loss_g = -D(G(torch.randn(8, 2))).mean()\n"
        "    loss_g.backward()\n    opt_g.step()")))
    assert discover(script).line == 17


def test_a_method_named_as_a_function_of_the_script_does_not_hide_the_function(tmp_path):
    spec = discover(_written(tmp_path, (
        "class EMA:\n    def update(self, model):\n        pass\n\n\n"
        "def update(model, x, optimizer):\n    optimizer.zero_grad()\n    model(x).sum().backward()\n    optimizer.step()\n\n\n"
        "ema = EMA()\nfor x in data:\n    update(model, x, opt)\n    ema.update(model)\n")))
    assert (spec.line, spec.step_call, spec.models) == (19, 20, ["model"])


def test_compile_is_refused_where_an_epoch_loop_of_the_caller_unfreezes(tmp_path):
    """The batch loop in `train_one_epoch(...)`, the backbone unfrozen in main()'s epoch loop."""
    script = _written(tmp_path, (
        "def train_one_epoch():\n    for x in data:\n        opt.zero_grad()\n        model(x).sum().backward()\n"
        "        opt.step()\n\n\nmodel.requires_grad_(False)\nfor epoch in range(3):\n    if epoch == 1:\n"
        "        model.requires_grad_(True)\n    train_one_epoch()\n"))
    with pytest.raises(PatchRefused, match="line 17: the loop changes which parameters require grad"):
        make_patch(script, "compile")


def test_compile_sees_the_unfreezing_function_behind_a_method_of_its_name(tmp_path):
    """`unfreeze(model, epoch)` called in the loop, and a class defined later with a method
    `unfreeze`: the bare call runs the function, which flips requires_grad, so compile is
    refused. The data-flow rules once read the name through a map where the later method
    replaced the function, and let compile train with the flags of its first call."""
    script = _written(tmp_path, (
        "def unfreeze(model, epoch):\n    model.requires_grad_(epoch > 0)\n\n\n"
        "class Freezer:\n    def unfreeze(self, model, epoch):\n        pass\n\n\n"
        "for epoch in range(2):\n    unfreeze(model, epoch)\n    for x in data:\n        opt.zero_grad()\n"
        "        model(x).sum().backward()\n        opt.step()\n"))
    with pytest.raises(PatchRefused, match="the loop changes which parameters require grad"):
        make_patch(script, "compile")


@pytest.mark.parametrize("body, applies", [   # applies: without the copy of gradients
    # torchvision's fine-tuning tutorial: backward and step under one condition, inside a with
    ("for phase in ['train', 'val']:\n    for x in data:\n        opt.zero_grad()\n"
     "        with torch.set_grad_enabled(phase == 'train'):\n            loss = model(x).sum()\n"
     "            if phase == 'train':\n                loss.backward()\n                opt.step()\n", True),
    # torchvision's classification reference: a backward and a step in each branch
    ("use_clip = True\nfor x in data:\n    opt.zero_grad()\n    loss = model(x).sum()\n    if use_clip:\n"
     "        loss.backward()\n        nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n        opt.step()\n"
     "    else:\n        loss.backward()\n        opt.step()\n", True),
    # accumulation: the backward every iteration, the step every second
    ("for i, x in enumerate(data):\n    loss = model(x).sum()\n    loss.backward()\n    if i % 2 == 1:\n"
     "        opt.step()\n        opt.zero_grad()\n", False),
    # a branch that steps without a backward of its own
    ("for i, x in enumerate(data):\n    loss = model(x).sum()\n    if i % 2:\n        loss.backward()\n"
     "    else:\n        opt.step()\n", False),
    # accelerate's `with accelerator.accumulate(model):`, which skips the step it holds k-1 times in k
    ("import contextlib\n\n\nclass Accelerator:\n    def accumulate(self, model):\n"
     "        return contextlib.nullcontext()\n\n\naccelerator = Accelerator()\nfor x in data:\n"
     "    with accelerator.accumulate(model):\n        loss = model(x).sum()\n        loss.backward()\n"
     "        opt.step()\n        opt.zero_grad()\n", False),
    # two backward passes before the step in one branch
    ("for x in data:\n    opt.zero_grad()\n    if True:\n        model(x).sum().backward()\n"
     "        model(x + 1).sum().backward()\n        opt.step()\n", False),
])
def test_compile_reads_a_conditional_step_after_its_own_backward_as_no_accumulation(tmp_path, body, applies):
    """compile copies gradients out of its CUDA graphs where they accumulate (was: refused); a
    step under a condition is accumulation only where a backward can run without its step."""
    out = make_patch(_written(tmp_path, body), "compile").patched
    assert "_cg_compiled_model" in out and ("register_hook(torch.clone)" in out) is not applies


def test_a_namedtuple_called_in_the_step_is_no_model_and_the_submodule_rewrite_skips_what_is_none(tmp_path):
    """The DQN tutorial's `Transition = namedtuple(...)`, called in its step: taken for a model,
    the submodule rewrite died at start-up on `Transition.children()` (H100)."""
    script = _written(tmp_path, (
        "from collections import namedtuple\nPair = namedtuple('Pair', ('x', 'y'))\n"
        "for x in data:\n    pair = Pair(x, x + 1)\n    opt.zero_grad()\n    model(pair.x).sum().backward()\n"
        "    opt.step()\n"))
    assert discover(script).models == ["model"]
    from tuner.templates import SUBMODULE_CHILDREN
    namespace = {"torch": torch}
    exec(SUBMODULE_CHILDREN, namespace)
    layers = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    assert list(namespace["_cg_children"](layers)) == list(layers) and list(namespace["_cg_children"](tuple)) == []


def test_compile_of_an_accumulating_loop_copies_each_gradient_out_of_its_graphs(tmp_path):
    """Hugging Face's run_glue_no_trainer steps every k batches: compile was refused there (its
    CUDA graphs hand gradients out of memory their next run overwrites); a hook per parameter
    now copies each gradient out, as fwd_bwd's helper does."""
    script = _written(tmp_path, (
        "for i, x in enumerate(data):\n    loss = model(x).sum() / 2\n    loss.backward()\n"
        "    if i % 2 == 1:\n        opt.step()\n        opt.zero_grad()\n"))
    out = make_patch(script, "compile").patched
    assert ("for _cg_p in (model.parameters() if isinstance(model, torch.nn.Module) else ()):" in out
            and "        _cg_p.register_hook(torch.clone)\n" in out)
    compile(out, "train.py", "exec")
    plain = make_patch(_written(tmp_path, "for x in data:\n    opt.zero_grad()\n    model(x).sum().backward()\n"
                                          "    opt.step()\n"), "compile").patched
    assert "register_hook" not in plain


@pytest.mark.parametrize("scope", ["compile", "fwd_bwd", "submodule"])
def test_a_step_that_differentiates_a_backward_again_is_refused_where_a_graph_backward_cannot_be(tmp_path, scope):
    """WGAN-GP's penalty, one call deeper: torch.autograd.grad(..., create_graph=True)."""
    script = _written(tmp_path, (
        "def penalty(model, x):\n    x = x.requires_grad_(True)\n"
        "    g, = torch.autograd.grad(model(x).sum(), x, create_graph=True)\n    return g.pow(2).mean()\n\n\n"
        "for x in data:\n    opt.zero_grad()\n    (model(x).sum() + penalty(model, x)).backward()\n    opt.step()\n"))
    with pytest.raises(PatchRefused, match="line 9: the step differentiates a backward again"):
        make_patch(script, scope)


def test_a_backward_made_in_a_helper_makes_a_training_loop(tmp_path):
    """`loss = forward_backward(model, x); opt.step()`, or a scaler whose step is one call
    deeper: the loop trains. Read before as a loop without backward: with a validation loop in
    the script, that loop was tuned in its place."""
    script = _written(tmp_path, (
        "def forward_backward(model, x):\n    loss = model(x).sum()\n    loss.backward()\n    return loss\n\n\n"
        "for x in data:\n    opt.zero_grad()\n    loss = forward_backward(model, x)\n    opt.step()\n"
        "with torch.no_grad():\n    for x in data:\n        model(x)\n"))
    spec = discover(script)
    assert (spec.line, spec.kind, spec.through_calls, spec.loss) == (13, "train", True, "loss")
    assert "_cg_graph_forward(model, accumulate=True)" in make_patch(script, "fwd_bwd").diff()
    with pytest.raises(PatchRefused, match="line 15: the step runs inside forward_backward\\(\\), which no graph can "
                       "hold: the loop runs backward\\(\\) or an optimizer step outside the call too"):
        make_patch(script, "full_iteration")


# a loop that reads no builtin itself: any read of one in the patched module is the patch's own
NO_BUILTIN_READS = """import torch
from torch import nn

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
criterion = nn.MSELoss()
x, y = torch.randn(16, 32, device="cuda"), torch.randn(16, 1, device="cuda")
"""
LOOP = """for step in torch.arange(200).tolist():
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
"""


def _rebinding_every_builtin(indent: str) -> str:
    import builtins
    import keyword

    names = sorted(n for n in vars(builtins) if n.isidentifier() and not keyword.iskeyword(n) and not n.startswith("_"))
    return "".join(f"{indent}{name} = None\n" for name in names)


def _reads_of_the_script_bindings(patched: str) -> list:
    """(name, line) of every read in ``patched`` that resolves to a binding of a builtin's name
    made by the script (libcst's scope analysis, not the patch's own)."""
    import builtins

    import libcst as cst
    from libcst.metadata import BuiltinAssignment, MetadataWrapper, PositionProvider, ScopeProvider

    wrapper = MetadataWrapper(cst.parse_module(patched))
    positions = wrapper.resolve(PositionProvider)
    return sorted({(access.node.value, positions[access.node].start.line)
                   for scope in set(wrapper.resolve(ScopeProvider).values()) if scope is not None
                   for access in scope.accesses
                   if isinstance(access.node, cst.Name) and access.node.value in vars(builtins)
                   and any(not isinstance(r, BuiltinAssignment) for r in access.referents)})


@pytest.mark.parametrize("scope", ["full_iteration", "fwd_bwd", "submodule", "compile"])
@pytest.mark.parametrize("where", ["module", "function"])
def test_emitted_code_reads_no_builtin_the_script_rebinds(scope, where, tmp_path):
    """A script that binds every builtin's name (the seq2seq tutorial's `for iter in ...`; here
    all of them, after its loop, where its own code reads none of them): the helpers and the
    setup a patch emits read Python's builtins, not those bindings. At module level the helpers'
    globals hold them; in the loop's function the setup emitted beside the loop would read the
    function's locals. Before, `iter` made the fwd_bwd and full_iteration helpers fail at their
    first capture on the GPU."""
    if where == "module":
        source = NO_BUILTIN_READS + LOOP + _rebinding_every_builtin("")
    else:
        body = "".join("    " + line + "\n" for line in LOOP.splitlines())
        source = NO_BUILTIN_READS + "\n\ndef train():\n" + body + _rebinding_every_builtin("    ") + "\n\ntrain()\n"
    script = tmp_path / "rebinds.py"
    script.write_text(source)
    assert _reads_of_the_script_bindings(source) == []   # the script itself reads none
    patched = make_patch(script, scope).patched
    assert _reads_of_the_script_bindings(patched) == []
    if scope != "compile" and where == "module":   # the helpers read builtins: through the alias the patch imports
        assert "import builtins as _cg_builtins\n" in patched and "_cg_builtins.iter(" in patched
    if where == "function":   # a function's own names leave the module's helpers as written
        assert "_cg_builtins.iter(" not in patched


def test_a_script_that_rebinds_no_builtin_gets_no_alias():
    """The alias only where it is needed: the corpus's plain loop's helpers read builtins as
    written."""
    patched = make_patch(CORPUS / "basic_for.py", "fwd_bwd").patched
    assert "_cg_builtins" not in patched and "positional.build(iter(found))" in patched


ROLLOUTS = """
import torch
from torch import nn

policy = nn.Linear(8, 4).cuda()
opt = torch.optim.SGD(policy.parameters(), lr=0.1)
states = torch.randn(64, 8, device="cuda")
actions = torch.zeros(64, device="cuda")
for rollout in range(10):
    with torch.no_grad():
        dist = torch.distributions.Categorical(logits=policy(states))
        old = dist.log_prob(actions)
    for k in range(4):
        dist = torch.distributions.Categorical(logits=policy(states))
        loss = -(dist.log_prob(actions) - old).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    {after}
"""


@pytest.mark.parametrize("after, returned", [
    ("print(loss.item())", "loss"),
    ("print(dist.entropy().mean().item())", "dist"),   # read after the step: it comes back (loss is not)
])
def test_a_name_bound_again_before_it_is_read_does_not_come_back_from_the_graph(after, returned, tmp_path):
    """PPO's shape (bench/workloads/unseen_2026-11-30/ppo_clip_gaussian_minibatch.py): each
    rollout binds `dist` afresh before it reads it, and the minibatch step binds it too. The
    step's `dist` is read by nothing, so the graph does not hand it back: a distribution it
    could not, and the full-iteration candidate failed on the H200 ("the captured step returns a
    Normal"). Where the loop reads it after the step, it still comes back."""
    script = tmp_path / "rollouts.py"
    script.write_text(ROLLOUTS.format(after=after))
    patched = make_patch(script, "full_iteration").patched
    assert f"        {returned} = _cg_step_graph(" in patched


ACTOR_CRITIC = """
import torch
from torch import nn
{imports}


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.mu, self.v = nn.Linear(8, 2), nn.Linear(8, 1)

    def forward(self, obs):
{body}


ac = ActorCritic().cuda()
opt = torch.optim.Adam(ac.parameters(), lr=1e-3)
obs, actions = torch.randn(64, 8, device="cuda"), torch.randn(64, 2, device="cuda")
for step in range(100):
    dist, value = ac(obs)
    loss = -dist.log_prob(actions).sum(-1).mean() + value.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("imports, body", [
    ("from torch.distributions import Normal", "        return Normal(self.mu(obs), 1.0), self.v(obs)"),
    ("import torch.distributions as D",
     "        dist = D.Normal(self.mu(obs), 1.0)\n        return dist, self.v(obs)"),
])
def test_fwd_bwd_refuses_a_model_whose_forward_returns_a_distribution(imports, body, tmp_path):
    """fwd_bwd's helper hands back a forward's tensors; an output holding a distribution makes it
    run the model eagerly for good (PPO's actor-critic on the H200: "the rewrite never replayed a
    CUDA graph"). The patch says so up front, and the profile's prediction of the scope with it;
    full_iteration, whose step builds and uses the distribution inside the graph, still applies."""
    script = tmp_path / "actor_critic.py"
    script.write_text(ACTOR_CRITIC.format(imports=imports, body=body))
    with pytest.raises(PatchRefused, match=r"ac's forward returns a torch.distributions object \(Normal, line 1[34]\)"):
        make_patch(script, "fwd_bwd")
    assert "_cg_step_graph(" in make_patch(script, "full_iteration").patched
    script.write_text(ACTOR_CRITIC.format(imports="", body="        return self.mu(obs), self.v(obs)").replace(
        "dist, value = ac(obs)\n    loss = -dist.log_prob(actions)", "mu, value = ac(obs)\n    loss = (mu - actions)"))
    assert "_cg_graph_forward(ac)" in make_patch(script, "fwd_bwd").patched


def _helper_namespace(patched: str) -> dict:
    """The patched module's imports, functions and classes run (not its loop): the helpers as
    the script would define them."""
    import ast

    tree = ast.parse(patched)
    tree.body = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
    namespace = {"__name__": "patched"}
    exec(compile(tree, "patched", "exec"), namespace)
    return namespace


def test_helpers_routed_through_the_alias_still_run(tmp_path):
    """A star import may bind any builtin, so every builtin the helpers read goes through
    `_cg_builtins`. They must still work: a module wrapped for its graph builds its call again
    from its tensors (`_cg_builtins.iter`) and is a torch module (not a zero-argument `super()`,
    which needs the bare name and raised "super(): __class__ cell not found" once routed). Run
    on the CPU: the forward is the eager one, the rest of the path is the graph's."""
    import torch.utils._pytree as pytree

    script = tmp_path / "star.py"
    script.write_text("from os.path import *\n" + NO_BUILTIN_READS + LOOP)
    patched = make_patch(script, "fwd_bwd").patched
    assert "_cg_builtins.iter(" in patched and "_cg_builtins.super" not in patched
    helpers = _helper_namespace(patched)
    module = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    leaves, layout = pytree.tree_flatten(((x,), {}))
    positional = helpers["_CgPositional"](module, module.forward, layout, leaves)
    (out,) = positional(x)
    assert torch.equal(positional.build(iter([out])), module(x))


@pytest.mark.parametrize("scope, emitted", [("fwd_bwd", "_cg_graph_forward(input"),
                                            ("submodule", "_cg_children(input)"),
                                            ("compile", "torch.compile(input,")])
def test_a_model_named_like_a_builtin_is_the_scripts_own(scope, emitted, tmp_path):
    """The setup beside the loop names the model: a model called `input` in a function that
    rebinds builtins is the script's variable, never `_cg_builtins.input`; only what the
    emitted text itself reads (`isinstance`, `any`) goes through the alias."""
    script = tmp_path / "named.py"
    script.write_text("import torch\nfrom torch import nn\n\n\ndef train():\n    any = isinstance = None\n"
                      "    input = nn.Linear(32, 1).cuda()\n    optimizer = torch.optim.SGD(input.parameters(), lr=0.01)\n"
                      "    x = torch.randn(16, 32, device='cuda')\n    for step in torch.arange(200).tolist():\n"
                      "        optimizer.zero_grad()\n        loss = input(x).sum()\n        loss.backward()\n"
                      "        optimizer.step()\n\n\ntrain()\n")
    patched = make_patch(script, scope).patched
    assert emitted in patched and "_cg_builtins.input" not in patched
    if scope == "submodule":
        assert "if _cg_builtins.any(" in patched


def test_the_alias_is_imported_before_its_first_use(tmp_path):
    """compile's setup beside the loop reads `isinstance` (gradients copied out where they
    accumulate); where a star import may rebind it, the alias's import goes first in the
    module, before a loop that an import after it would follow."""
    script = tmp_path / "late_import.py"
    script.write_text('"""A loop, then a late import."""\nfrom __future__ import annotations\nfrom os.path import *\n'
                      + NO_BUILTIN_READS + "for step in torch.arange(200).tolist():\n"
                      "    loss = criterion(model(x), y)\n    loss.backward()\n"
                      "    if step % 4 == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n"
                      "import json\n")
    patched = make_patch(script, "compile").patched
    assert patched.index("import builtins as _cg_builtins") < patched.index("_cg_builtins.isinstance")
    assert patched.startswith('"""A loop, then a late import."""\nfrom __future__ import annotations\nimport builtins')


def test_a_read_in_a_generator_made_before_the_step_keeps_the_name_live(tmp_path):
    """A generator expression runs when it is consumed: made before the step and read after it,
    it reads the step's value, so the name comes back from the graph."""
    script = tmp_path / "generator.py"
    script.write_text(NO_BUILTIN_READS + "for step in torch.arange(200).tolist():\n"
                      "    loss = torch.zeros(1)\n    later = (loss + k for k in torch.arange(3).tolist())\n"
                      "    optimizer.zero_grad()\n    loss = criterion(model(x), y)\n    loss.backward()\n"
                      "    optimizer.step()\n    print(list(later))\n")
    assert "    loss = _cg_step_graph(" in make_patch(script, "full_iteration").patched


def test_a_forward_that_samples_its_distribution_is_graphed(tmp_path):
    """A name bound to a distribution and then to its sample returns a tensor: no refusal."""
    script = tmp_path / "sampled.py"
    script.write_text(ACTOR_CRITIC.format(
        imports="from torch.distributions import Normal",
        body="        z = Normal(self.mu(obs), 1.0)\n        z = z.rsample()\n        return z, self.v(obs)").replace(
        "dist, value = ac(obs)\n    loss = -dist.log_prob(actions)", "z, value = ac(obs)\n    loss = (z - actions)"))
    assert "_cg_graph_forward(ac)" in make_patch(script, "fwd_bwd").patched


# a step the loop calls as a function of the script (tuner.step_function)
STEP_FUNCTION = "def step({params}):\n{body}\n\n\n{loop}"
PLAIN_STEP = "    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n    loss.backward()\n    opt.step()\n    return loss"


@pytest.mark.parametrize("params, body, loop, replay", [
    # the batch handed in: copied into the graph's buffers at each replay
    ("x", PLAIN_STEP, "for x in data:\n    loss = step(x)\nprint(loss.item())\n",
     ["_cg_step_graph = _CgFullIterationGraph(step, [opt], [model])", "    loss = _cg_step_graph(x)"]),
    # the model and optimizer handed in too, by keyword: a function that passes them on by name
    ("model, opt, x", PLAIN_STEP, "for x in data:\n    loss = step(model, opt, x=x)\n",
     ["def _cg_step_positional(_cg_arg0, _cg_arg1, _cg_arg2):", "    return step(_cg_arg0, _cg_arg1, x=_cg_arg2)",
      "_cg_step_graph = _CgFullIterationGraph(_cg_step_positional, [opt], [model])",
      "    loss = _cg_step_graph(model, opt, x)"]),
    # PyG's `return float(loss)`: a copy that returns the tensor, read after the replay; its
    # model.train() made again before each replay, and a result the loop keeps copied out
    ("", "    model.train()\n" + PLAIN_STEP.replace("model(x)", "model(data[0])").replace("return loss",
                                                                                       "return float(loss), loss"),
     "losses = []\nfor epoch in range(3):\n    value, kept = step()\n    losses.append(kept)\n",
     ["def _cg_step_tensors():", "    return loss",
      "_cg_step_graph = _CgFullIterationGraph(_cg_step_tensors, [opt], [model], clone_outputs=True)",
      "    model.train()\n    _cg_loss = _cg_step_graph()  # cg-advise: replays the captured step()\n"
      "    value, kept = float(_cg_loss), _cg_loss\n"]),
    # an argument changed in place: the replay changes the graph's copy, which goes back into
    # the loop's tensor (by its position in the call, the keyword wrapper's order)
    ("model, x", "    x.mul_(0.5)\n" + PLAIN_STEP, "for x in data:\n    loss = step(model, x=x)\n",
     ["_cg_step_graph = _CgFullIterationGraph(_cg_step_positional, [opt], [model], changed_inputs=[1])"]),
    # a loss added up on the GPU as it comes back: the sum is made before the next replay
    ("x", PLAIN_STEP.replace("return loss", "return loss.detach()"),
     "running = torch.zeros(())\nfor x in data:\n    running += step(x)\nprint(running.item())\n",
     ["_cg_step_graph = _CgFullIterationGraph(step, [opt], [model])\n", "    running += _cg_step_graph(x)  # cg-advise"]),
    # added into a list, which keeps what it is handed: copies
    ("x", PLAIN_STEP.replace("return loss", "return loss.detach().reshape(1)"),
     "losses = []\nfor x in data:\n    losses += step(x)\n",
     ["_cg_step_graph = _CgFullIterationGraph(step, [opt], [model], clone_outputs=True)",
      "    losses += _cg_step_graph(x)  # cg-advise"]),
    # PyG's float, added up: read after the replay
    ("", "    model.train()\n" + PLAIN_STEP.replace("model(x)", "model(data[0])").replace("return loss",
                                                                                       "return float(loss)"),
     "total = 0.0\nfor epoch in range(3):\n    total += step()\n",
     ["    _cg_loss = _cg_step_graph()  # cg-advise: replays the captured step()\n    total += float(_cg_loss)\n"]),
])
def test_a_step_the_loop_calls_as_a_function_is_captured_whole(params, body, loop, replay, tmp_path):
    """`loss = train_step(model, opt, x)` or PyG's `loss = train()`: the call is the step; the
    loop calls its graph in its place, the function itself left as it is for other callers."""
    script = tmp_path / "step_function.py"
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(params=params, body=body, loop=loop)))
    patched = make_patch(script, "full_iteration").patched
    for line in replay:
        assert line in patched, line
    assert f"def step({params}):\n{body}\n" in patched
    namespace = {}
    exec(compile(patched, str(script), "exec"), namespace)   # runs eagerly on the CPU: the helper's fallback
    assert namespace["_cg_step_graph"].graph is None


@pytest.mark.parametrize("params, body, loop, refused", [
    ("x", PLAIN_STEP.replace("    loss.backward()", "    print(loss.item())\n    loss.backward()"),
     "for x in data:\n    loss = step(x)\n", r"reads a value on the host \(print\(\)\)"),
    ("x", "    x = x.to('cpu')\n" + PLAIN_STEP, "for x in data:\n    loss = step(x)\n", r"moves tensors with \.to\(\)"),
    ("x, losses", PLAIN_STEP.replace("    return loss", "    losses.append(loss)"),
     "losses = []\nfor x in data:\n    step(x, losses)\n", r"changes what it is handed \(losses\.append\(loss\)\)"),
    ("x", PLAIN_STEP.replace("    opt.zero_grad()\n", ""), "for x in data:\n    loss = step(x)\n",
     "neither step\\(\\) nor the loop zeroes the gradients"),
    ("", PLAIN_STEP.replace("(x)", "(batch)"), "for batch in data:\n    loss = step()\n",
     "reads the global 'batch', which the script binds again"),
    ("x, scale", PLAIN_STEP.replace(".mean()", ".mean() * scale"), "for i in range(3):\n    loss = step(data[0], i)\n",
     "it is passed i, a Python number that changes every iteration"),
    ("x, flag", PLAIN_STEP.replace("    opt.step()", "    if flag:\n        opt.step()"),
     "for x in data:\n    loss = step(x, True)\n", "runs backward, the optimizer step or zero_grad conditionally"),
    ("x", "    if x is None:\n        return None\n" + PLAIN_STEP, "for x in data:\n    loss = step(x)\n",
     "may return early"),
    ("x", "    global calls\n    calls += 1\n" + PLAIN_STEP, "calls = 0\nfor x in data:\n    loss = step(x)\n",
     "rebinds a name outside itself"),
    ("x", PLAIN_STEP, "sched = torch.optim.lr_scheduler.StepLR(opt, 1)\nfor x in data:\n    loss = step(x)\n    sched.step()\n",
     "a GradScaler or a learning-rate schedule"),
    ("x", PLAIN_STEP, "for x in data:\n    y = model(x)\n    loss = step(y)\n", "the loop calls the model before the call too"),
    ("x", PLAIN_STEP, "for x in data:\n    loss = step(x)\n    model(x).sum().backward()\n    opt.step()\n",
     "the loop runs backward\\(\\) or an optimizer step outside the call too"),
    ("x", "    model.train(x.numel() > 3)\n" + PLAIN_STEP, "for x in data:\n    loss = step(x)\n",
     "sets the model's mode from a value"),
    # found by the review: what a graph would bake in, run once, or change in its copy
    ("x", PLAIN_STEP.replace(".mean()", ".mean() * cfg['scale']"),
     "cfg = {'scale': 1.0}\nfor i, x in enumerate(data):\n    cfg['scale'] = 1 / (i + 1)\n    loss = step(x)\n",
     "it reads the global 'cfg', whose attribute or item the loop sets"),
    ("x", PLAIN_STEP.replace("    return loss", "    record(loss)"),
     "history = []\n\n\ndef record(value):\n    history.append(value)\n\n\nfor x in data:\n    step(x)\n",
     r"calls record\(\), Python-side work"),
    ("x, losses", PLAIN_STEP.replace("    return loss", "    with torch.no_grad():\n        losses.append(loss)"),
     "losses = []\nfor x in data:\n    step(x, losses)\n", r"changes what it is handed \(losses\.append\(loss\)\)"),
    ("x, losses", PLAIN_STEP.replace("    return loss", "    losses += [loss]"),
     "losses = []\nfor x in data:\n    step(x, losses)\n", r"changes what it is handed \(losses \+= \[loss\]\): a graph would change its own copy"),
    ("x, extra", PLAIN_STEP.replace("    return loss", "    extra['seen'] = loss"),
     "extra = {}\nfor x in data:\n    step(x, extra)\n", r"changes what it is handed \(extra\['seen'\] = loss\)"),
    ("x", PLAIN_STEP.replace("    return loss", "    return loss, opt.param_groups[0]['lr']"),
     "for x in data:\n    loss, lr = step(x)\n", r"it returns opt\.param_groups\[0\]\['lr'\], which a replay cannot update"),
    ("x", PLAIN_STEP, "_cg_step_graph = None\nfor x in data:\n    loss = step(x)\n",
     "the script already uses _cg_step_graph, a name the rewrite emits"),
    ("x", PLAIN_STEP.replace("    loss.backward()\n    opt.step()",
                             "    scaler.scale(loss).backward()\n    scaler.step(opt)\n    scaler.update()"),
     "scaler = torch.cuda.amp.GradScaler(enabled=False)\nfor x in data:\n    loss = step(x)\n",
     r"scaler\.scale\(\) inside it: a GradScaler"),
    ("x", PLAIN_STEP, "for run in range(2):\n    model = nn.Linear(4, 1)\n    for x in data:\n        loss = step(x)\n",
     "'model', passed as 'model', is bound again inside the loop"),
])
def test_a_step_function_one_replay_cannot_stand_for_is_refused_saying_why(params, body, loop, refused, tmp_path):
    """What a capture would run once (Python state, host reads and data), what it would bake in
    (a global the loop binds again, a number that changes), what it would split (a step under a
    condition, a forward outside the call), and gradients the calls add up: refused, naming it."""
    script = tmp_path / "step_function.py"
    # the model and optimizer handed in: the function's own step cannot be rewritten in it either
    loop = re.sub(r"(?<![.\w])step\((.*)\)", r"step(model, opt, \1)", loop).replace("opt, )", "opt)")
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(params=f"model, opt, {params}".rstrip(", "), body=body,
                                                                loop=loop)))
    with pytest.raises(PatchRefused, match="the step runs inside step\\(\\), (which|and) .*" + refused):
        make_patch(script, "full_iteration")


def test_a_step_function_the_calling_function_defines_again_is_refused(tmp_path):
    """The checks read the module's function; a local one of that name is what the call runs."""
    script = tmp_path / "step_function.py"
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(
        params="x", body=PLAIN_STEP, loop="def main():\n    def step(x):\n        return x\n\n"
                                            "    for x in data:\n        loss = step(x)\n")))
    with pytest.raises(PatchRefused, match="the calling function binds a step of its own"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("body, loop, expected", [
    # the parameters named otherwise than the caller's arguments; a tensor made from its loss returned
    (PLAIN_STEP.replace("return loss", "return loss.detach()"), "for x in data:\n    loss = step(model, opt, x)\n",
     ["_cg_step_graph = _CgFullIterationGraph(step, [opt], [model])", "    loss = _cg_step_graph(model, opt, x)"]),
    # a keyword call and `return float(loss)`: the copy and the positional wrapper apart
    (PLAIN_STEP.replace("return loss", "return float(loss)"), "for x in data:\n    value = step(model, opt, x=x)\n",
     ["def _cg_step_tensors(net, optimizer, x):", "    return _cg_step_tensors(_cg_arg0, _cg_arg1, x=_cg_arg2)",
      "    _cg_loss = _cg_step_graph(model, opt, x)  # cg-advise: replays the captured step()\n    value = float(_cg_loss)"]),
])
def test_a_step_function_of_its_own_names_is_captured_whole(body, loop, expected, tmp_path):
    """`train_step(net, opt, x)` whose parameters are `model, optimizer`: the models and
    optimizers are read through the call's arguments."""
    script = tmp_path / "step_function.py"
    body = body.replace("opt.", "optimizer.").replace("model(", "net(")
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(params="net, optimizer, x", body=body, loop=loop)))
    patched = make_patch(script, "full_iteration").patched
    for text in expected:
        assert text in patched, text
    exec(compile(patched, str(script), "exec"), {})


def test_a_copy_of_the_step_function_in_a_function_that_shadows_its_globals_is_refused(tmp_path):
    """The copy that returns the tensor (PyG's `return float(loss)`) is defined beside the loop:
    in a function that binds a name the step reads as a global, it would read the local."""
    script = tmp_path / "step_function.py"
    body = PLAIN_STEP.replace("model(x)", "model(data[0])").replace("return loss", "return float(loss)")
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(
        params="model, opt", body=body,
        loop="def main():\n    data = [None]\n    for epoch in range(3):\n        loss = step(model, opt)\n")))
    with pytest.raises(PatchRefused, match="reads the global 'data', which the calling function binds too"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("step_line, what", [
    ("    loss = model(x)[x[:, 0] > 0].pow(2).mean()\n", "indexing by a boolean mask"),
    ("    loss = model(x)[train_mask].pow(2).mean()\n", "indexing by a boolean mask"),
    ("    loss = model(x)[keep].pow(2).mean()\n", "indexing by a boolean mask"),   # bound to a comparison
    ("    loss = model(x)[~keep].pow(2).mean()\n", "indexing by a boolean mask"),
    ("    loss = model(x)[x.nonzero()[:, 0]].pow(2).mean()\n", "nonzero()"),
    ("    loss = torch.masked_select(model(x), x[:, :1] > 0).mean()\n", "masked_select()"),
    ("    loss = model(x)[train_mask.bool()].pow(2).mean()\n", "indexing by a boolean mask"),
])
def test_a_step_whose_sizes_depend_on_the_values_refuses_full_iteration(step_line, what, tmp_path):
    """PyG's `out[data.train_mask]`: the host waits for the mask's count, which a capture
    cannot (tune's capture failed: `operation not permitted when stream is capturing`), in a
    loop's step and in a step function alike; an index found before the loop is no such thing."""
    body = ("train_mask = torch.rand(2) > 0.5\nkeep = train_mask.clone() == True\n"
            "for x in data:\n    opt.zero_grad()\n" + step_line + "    loss.backward()\n    opt.step()\n")
    script = tmp_path / "masked.py"
    script.write_text(LIVE_OUT.format(body=body))
    with pytest.raises(PatchRefused, match=f"in the step is {re.escape(what)}, whose size depends on the values"):
        make_patch(script, "full_iteration")
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(
        params="x", body=PLAIN_STEP.replace("    loss = model(x).pow(2).mean()\n", step_line),
        loop="train_mask = torch.rand(2) > 0.5\nkeep = train_mask.clone() == True\nfor x in data:\n    loss = step(x)\n")))
    with pytest.raises(PatchRefused, match=re.escape(what)):
        make_patch(script, "full_iteration")
    script.write_text(LIVE_OUT.format(body=body.replace(step_line, "    loss = model(x)[index].pow(2).mean()\n")
                                      .replace("for x", "index = train_mask.nonzero(as_tuple=True)[0]\nfor x")))
    assert "_cg_step_graph(x)" in make_patch(script, "full_iteration").patched


EPOCH_STEP = ("def train(epoch):\n    model.train()\n    opt.zero_grad()\n    loss = model(data[0]).pow(2).mean(){scale}\n"
              "    loss.backward()\n    opt.step()\n    if epoch % 2 == 0:\n        print(loss.item())\n{tail}\n\n")


@pytest.mark.parametrize("tail, loop, expected", [
    # Kipf's pygcn: the function keeps its host work; its step statements become the graph's,
    # made right after it, where its model and optimizer exist already
    ("", "for epoch in range(3):\n    train(epoch)\n",
     ["def train(epoch):\n    model.train()\n    loss = _cg_step_graph()  # cg-advise: replays the captured step\n",
      "    return loss\n\n\n_cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model])\n\n\nfor epoch"]),
    # called from main(): the graph is a global the function reads
    ("", "def main():\n    for epoch in range(3):\n        train(epoch)\n\n\nmain()\n",
     ["    return loss\n\n\n_cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model])\n\n\ndef main"]),
    # the loss handed to the caller, who may keep it past the next replay: copies
    ("    return loss", "losses = [train(epoch) for epoch in range(3)]\nfor epoch in range(3):\n    train(epoch)\n",
     ["_CgFullIterationGraph(_cg_step, [opt], [model], clone_outputs=True)"]),
])
def test_a_step_function_with_host_work_around_its_step_has_its_step_captured(tail, loop, expected, tmp_path):
    """Where the call cannot be captured whole (it prints after the step), the function's own
    step statements are, as a loop body's would be, and it calls the graph in their place."""
    script = tmp_path / "epoch_step.py"
    script.write_text(LIVE_OUT.format(body=EPOCH_STEP.format(scale="", tail=tail) + loop))
    patched = make_patch(script, "full_iteration").patched
    for text in expected:
        assert text in patched, text
    namespace = {}
    exec(compile(patched, str(script), "exec"), namespace)   # runs eagerly on the CPU: the helper's fallback
    assert namespace["_cg_step_graph"].graph is None


def test_a_step_function_whose_step_reads_the_loops_counter_is_refused(tmp_path):
    """`train(epoch)` whose step scales the loss by ``epoch``: a graph would hold its first value."""
    script = tmp_path / "epoch_step.py"
    script.write_text(LIVE_OUT.format(body=EPOCH_STEP.format(scale=" * epoch", tail="")
                                      + "for epoch in range(3):\n    train(epoch)\n"))
    with pytest.raises(PatchRefused, match="the step runs inside train\\(\\), and a graph can capture neither the call "
                       "whole .* nor its step statements: its step reads 'epoch', a Python number the loop changes"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("caller, expected", [
    ("for epoch in range(3):\n    train(epoch)\n",
     "\n_cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model])\n\nfor epoch in range(3):\n"),
    ("def main():\n    for epoch in range(3):\n        train(epoch)\n\n\nmain()\n",
     "    global _cg_step_graph\n    _cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model])\n"),
    ("train(0)\nfor epoch in range(3):\n    train(epoch)\n", None),
])
def test_a_step_function_defined_before_its_model_gets_its_graph_before_the_loop(caller, expected, tmp_path):
    """The model and optimizer made after the function: the graph is made before the calling
    loop (a global where the loop is in a function), and refused where the function is called
    before it would exist."""
    script = tmp_path / "epoch_step.py"
    script.write_text("import torch\nfrom torch import nn\n\n\n" + EPOCH_STEP.format(scale="", tail="")
                      + LIVE_OUT.split("\n", 2)[2].format(body=caller))
    if expected is None:
        with pytest.raises(PatchRefused, match="it is called elsewhere too"):
            make_patch(script, "full_iteration")
        return
    patched = make_patch(script, "full_iteration").patched
    assert expected in patched
    exec(compile(patched, str(script), "exec"), {})


@pytest.mark.parametrize("before, set_line, read, path", [
    ("cfg = {'scale': 1.0}\n", "    cfg['scale'] = 1 / (i + 1)\n", "cfg['scale']", "cfg['scale']"),
    ("import types\ncfg = types.SimpleNamespace(scale=1.0)\n", "    cfg.scale = 1 / (i + 1)\n", "cfg.scale", "cfg.scale"),
])
def test_a_value_the_loop_sets_through_an_attribute_or_key_and_the_step_reads_is_refused(before, set_line, read, path,
                                                                                        tmp_path):
    """`cfg["scale"] = 1 / (i + 1)` outside the step, read in it: a graph reads what it read at
    capture, so every replay would use the first value (found by the review of 2026-11-30)."""
    script = tmp_path / "set_around.py"
    script.write_text(LIVE_OUT.format(body=before) + "for i, x in enumerate(data):\n" + set_line + "    opt.zero_grad()\n"
                      f"    loss = model(x).pow(2).mean() * {read}\n    loss.backward()\n    opt.step()\n")
    with pytest.raises(PatchRefused, match=f"the loop sets {re.escape(path)} outside the step, which the step reads"):
        make_patch(script, "full_iteration")


IN_PLACE_STEP = ("for x, y in pairs:\n    opt.zero_grad()\n    loss = (model(x) - y).pow(2).mean()\n"
                 "    loss.backward()\n{change}    opt.step()\n")
PAIRS = "pairs = [(torch.randn(2, 4), torch.randn(2, 1)) for _ in range(3)]\n"


@pytest.mark.parametrize("change, positions", [
    ("    x.mul_(0.5)\n", "[0]"),
    ("    y.clamp_(-1, 1)\n", "[1]"),
    ("    x[:, 0] = 0.0\n", "[0]"),
    ("    torch.mul(y, 2, out=y)\n", "[1]"),
    ("    x.mul_(0.5)\n    y.add_(1)\n", "[0, 1]"),
    ("    z = loss * 2\n    z.mul_(0.5)\n", None),
])
def test_a_batch_the_step_changes_in_place_is_copied_back_after_each_replay(change, positions, tmp_path):
    """Eager changes the loop's own tensor (and the list it came from); a replay changes the
    graph's copy of it, so the helper copies that back into the loop's tensor: the inputs'
    positions the step changes are handed to it (none where it changes its own tensors)."""
    patched = _patched(tmp_path, PAIRS + IN_PLACE_STEP.format(change=change))
    helper = "_cg_step_graph = _CgFullIterationGraph(_cg_step, [opt], [model]"
    assert (helper + f", changed_inputs={positions})" if positions else helper + ")") in patched


def test_a_step_that_stores_into_its_batch_by_key_is_refused(tmp_path):
    script = _written(tmp_path, "batches = [{'x': torch.randn(2, 4)} for _ in range(3)]\n"
                      "for batch in batches:\n    opt.zero_grad()\n    loss = model(batch['x']).pow(2).mean()\n"
                      "    batch['loss'] = loss.detach()\n    loss.backward()\n    opt.step()\n")
    with pytest.raises(PatchRefused, match=r"line 11: the step changes the batch it is handed "
                                           r"\(batch\['loss'\] = loss\.detach\(\)\): a graph would change its own copy"):
        make_patch(script, "full_iteration")


def _run_to_its_end(script) -> dict:
    namespace = {"__name__": "__main__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(script.read_text(), str(script), "exec"), namespace)
    namespace["caught"] = [str(w.message) for w in caught]
    return namespace


ON_THE_GPU_IN_PLACE = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
pairs = [(torch.randn(2, 4, device="cuda"), torch.randn(2, 1, device="cuda")) for _ in range(8)]
for x, y in pairs:
    opt.zero_grad()
    loss = (model(x) - y).pow(2).mean()
    loss.backward()
    x.mul_(0.5)
    y[:, 0] = y[:, 0] + loss.detach()
    opt.step()
"""


@requires_cuda
def test_on_the_gpu_a_batch_changed_in_place_ends_as_eager_leaves_it(tmp_path):
    """Run to its end, the rewrite leaves the loop's batches and the model as eager does."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_IN_PLACE)
    assert ran[1]["_cg_step_graph"].replays == 8   # the capture's call replays too: none ran eagerly
    for (a, b), (c, d) in zip(ran[0]["pairs"], ran[1]["pairs"]):
        torch.testing.assert_close(a, c)
        torch.testing.assert_close(b, d)
    torch.testing.assert_close(ran[0]["model"].weight, ran[1]["model"].weight)


@requires_cuda
def test_on_the_gpu_a_step_that_puts_other_tensors_into_its_input_runs_eagerly_as_eager_does():
    """A step that replaces an item of its input (``batch[0] = batch[0] * 0.5``) made the graph
    read the tensor of the capture at every replay; the helper sees it and runs eagerly."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    results = []
    for graphed in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        batches = [[torch.randn(2, 4, device="cuda")] for _ in range(6)]

        def step(batch, model=model, opt=opt):
            batch[0] = batch[0] * 0.5
            loss = model(batch[0]).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        run = namespace["_CgFullIterationGraph"](step, [opt], [model]) if graphed else None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for batch in batches:
                if run is None:
                    opt.zero_grad()
                    step(batch)
                else:
                    run(batch)
        results.append((model.weight.detach().clone(), [str(w.message) for w in caught], run))
    torch.testing.assert_close(results[0][0], results[1][0])
    assert any("puts other tensors into its inputs" in message for message in results[1][1])
    assert results[1][2].eager and results[1][2].graph is None


@pytest.mark.parametrize("change, positions", [
    ("    torch.clamp_(x, -0.1, 0.1)\n", "[0]"),
    ("    torch.nn.functional.relu(y, inplace=True)\n", "[1]"),
    ("    torch.nn.init.zeros_(y)\n", "[1]"),
])
def test_an_in_place_function_of_the_batch_is_copied_back_too(change, positions, tmp_path):
    patched = _patched(tmp_path, PAIRS + IN_PLACE_STEP.format(change=change))
    assert f"_CgFullIterationGraph(_cg_step, [opt], [model], changed_inputs={positions})" in patched


@pytest.mark.parametrize("step_body, helper", [
    # the batch unpacked inside the function: x is a part of it, its change a change of the batch
    ("    x, y = batch\n    opt.zero_grad()\n    loss = (model(x) - y).pow(2).mean()\n    loss.backward()\n"
     "    x.mul_(0.5)\n    opt.step()\n    return loss",
     "_CgFullIterationGraph(step, [opt], [model], changed_inputs=[0])"),
    ("    x = batch[0].view(2, 4)\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n    loss.backward()\n"
     "    for t in batch:\n        t.clamp_(-1, 1)\n    opt.step()\n    return loss",
     "_CgFullIterationGraph(step, [opt], [model], changed_inputs=[0])"),
    # the model handed in is not an input whose tensors change (clip_grad_norm_ of its parameters)
    ("    opt.zero_grad()\n    loss = model(batch[0]).pow(2).mean()\n    loss.backward()\n"
     "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    opt.step()\n    return loss",
     "_CgFullIterationGraph(step, [opt], [model])\n"),
])
def test_a_step_function_that_changes_a_part_of_its_batch_copies_the_batch_back(step_body, helper, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=f"batches = [(x, x[:, :1]) for x in data]\n\n\ndef step(batch):\n{step_body}\n\n\n"
                                           "for batch in batches:\n    loss = step(batch)\n"))
    assert helper in make_patch(script, "full_iteration").patched


@pytest.mark.parametrize("body, refused", [
    ("batches = [{'x': x, 'labels': x[:, :1]} for x in data]\nfor batch in batches:\n    opt.zero_grad()\n"
     "    out = model(batch['x'])\n    labels = batch.pop('labels')\n    loss = (out - labels).pow(2).mean()\n"
     "    loss.backward()\n    opt.step()\n",
     r"the step changes the batch it is handed \(batch\.pop\('labels'\)\)"),
    ("batches = [{'x': x, 'labels': x[:, :1]} for x in data]\n\n\ndef step(batch):\n    opt.zero_grad()\n"
     "    labels = batch.pop('labels')\n    loss = (model(batch['x']) - labels).pow(2).mean()\n    loss.backward()\n"
     "    opt.step()\n    return loss\n\n\nfor batch in batches:\n    loss = step(batch)\n",
     r"changes what it is handed \(batch\.pop\('labels'\)\)"),
])
def test_a_step_that_takes_items_out_of_its_batch_is_refused(body, refused, tmp_path):
    """Before, the rewrite was printed and its warm-up's second step failed (KeyError: 'labels'):
    each warm-up step popped from the graph's copy of the batch."""
    with pytest.raises(PatchRefused, match=refused):
        make_patch(_written(tmp_path, body), "full_iteration")


@pytest.mark.parametrize("loop, clones", [
    ("running = 0.0\nfor x in data:\n    running += step(x)\n", False),
    ("running = torch.zeros(())\nfor x in data:\n    running += step(x)\n", False),
    # a list handed in from elsewhere (a parameter, a dict's value): its += keeps what it is given
    ("def train(losses):\n    for x in data:\n        losses += step(x)\n\n\ntrain([])\n", True),
])
def test_a_step_function_added_up_copies_its_result_unless_the_sum_is_a_number_or_tensor(loop, clones, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(
        params="x", body=PLAIN_STEP.replace("return loss", "return loss.detach().reshape(1)"), loop=loop)))
    assert ("clone_outputs=True" in make_patch(script, "full_iteration").patched) is clones


def test_the_helper_finds_each_changed_input_among_the_flattened_tensors():
    """The copy back after a replay takes each changed input's tensors where the flattened
    inputs hold them: a dict, a number and a tuple before them shift them."""
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    helper = namespace["_CgFullIterationGraph"](lambda *inputs: None, [], [], changed_inputs=[1, 3])
    inputs = ({"a": torch.zeros(1), "b": torch.zeros(2)}, torch.zeros(3), 0.5, (torch.zeros(4), [torch.zeros(5)]))
    assert helper._changed_spans(inputs) == [(2, 3), (3, 5)]


ON_THE_GPU_CARRIED = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(2, 4, device="cuda") for _ in range(8)]
memory = torch.zeros(2, 4, device="cuda")
for x in data:
    opt.zero_grad()
    out = model(x + memory)
    memory.mul_(0.5)
    memory = memory + out.detach()
    loss = (out - memory).pow(2).mean()
    loss.backward()
    opt.step()
"""


@requires_cuda
def test_on_the_gpu_state_the_loop_carries_and_changes_in_place_ends_as_eager_leaves_it(tmp_path):
    """The carried tensor is the graph's own output from the second replay on: copied back
    into, it would lose the step's new value (the review's case)."""
    eager = tmp_path / "eager.py"
    eager.write_text(ON_THE_GPU_CARRIED)
    graphed = tmp_path / "graphed.py"
    graphed.write_text(make_patch(eager, "full_iteration").patched)
    assert "changed_inputs=[1]" in graphed.read_text()
    ran = [_run_to_its_end(script) for script in (eager, graphed)]
    assert ran[1]["_cg_step_graph"].replays == 8
    torch.testing.assert_close(ran[0]["memory"], ran[1]["memory"])
    torch.testing.assert_close(ran[0]["model"].weight, ran[1]["model"].weight)


@pytest.mark.parametrize("loop, replay, clones", [
    ("losses = []\nfor x in data:\n    losses.append(step(x))\n", "    losses.append(_cg_step_graph(x))  # cg-advise", True),
    ("total = 0.0\nfor x in data:\n    total += float(step(x))\n", "    total += float(_cg_step_graph(x))  # cg-advise", False),
    ("total = 0.0\nfor x in data:\n    total += step(x).item()\n", "    total += _cg_step_graph(x).item()  # cg-advise", False),
])
def test_a_step_function_called_inside_a_statement_is_replayed_in_its_place(loop, replay, clones, tmp_path):
    """``losses.append(train_step(...))``: the replay takes the call's place in the statement,
    its result copied out unless the statement reads it on the host at once."""
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(params="x", body=PLAIN_STEP, loop=loop)))
    patched = make_patch(script, "full_iteration").patched
    assert replay in patched
    assert ("clone_outputs=True" in patched) is clones


def test_a_step_function_called_in_a_comprehension_is_refused_saying_where(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body=STEP_FUNCTION.format(
        params="x", body=PLAIN_STEP, loop="for epoch in range(2):\n    losses = [step(x) for x in data]\n")))
    with pytest.raises(PatchRefused, match="called in a comprehension, a lambda, a conditional expression"):
        make_patch(script, "full_iteration")


@pytest.mark.parametrize("change, expected", [
    ("    x /= 255.0\n", "changed_inputs=[0]"),   # in place on a tensor: copied back
    ("    y.unsqueeze_(1)\n", None),   # a shape the warm-up would change again and again
])
def test_a_step_function_that_changes_its_argument_by_an_operator_or_its_shape(change, expected, tmp_path):
    script = tmp_path / "train.py"
    body = ("    opt.zero_grad()\n    loss = (model(x) - y[:, :1]).pow(2).mean()\n    loss.backward()\n"
            f"{change}    opt.step()\n    return loss")
    script.write_text(LIVE_OUT.format(body=PAIRS + STEP_FUNCTION.format(
        params="x, y", body=body, loop="for x, y in pairs:\n    loss = step(x, y)\n")))
    if expected:
        assert expected in make_patch(script, "full_iteration").patched
    else:
        with pytest.raises(PatchRefused, match=r"changes what it is handed \(y\.unsqueeze_\(1\)\)"):
            make_patch(script, "full_iteration")


@pytest.mark.parametrize("body", [
    "bank = torch.zeros(4)\nfor x in data:\n    opt.zero_grad()\n    out = model(x)\n    loss = out.pow(2).mean()\n"
    "    loss.backward()\n    bank.mul_(0.9).add_(x.mean(0), alpha=0.1)\n    opt.step()\n",
    "bank = torch.zeros(4)\n\n\ndef step(x):\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n"
    "    loss.backward()\n    bank.mul_(0.9).add_(x.mean(0), alpha=0.1)\n    opt.step()\n    return loss\n\n\n"
    "for x in data:\n    loss = step(x)\n",
])
def test_a_global_tensor_the_step_changes_in_place_is_put_back_after_the_warm_up(body, tmp_path):
    """The warm-up's three steps would update a memory bank three more times than eager: the
    helper is handed it, to restore with the models."""
    assert "[opt], [model], state=[bank])" in _patched(tmp_path, body)


def test_the_helper_runs_eagerly_where_a_changed_input_shares_memory_with_another():
    from tuner.templates import FULL_ITERATION

    namespace = {"torch": torch}
    exec(FULL_ITERATION, namespace)
    helper = namespace["_CgFullIterationGraph"](lambda *inputs: None, [], [], changed_inputs=[0])
    x, y = torch.zeros(3), torch.zeros(3)
    assert helper._changed_share_memory((x, x), [x, x])
    assert helper._changed_share_memory((x[:1], x[1:]), [x[:1], x[1:]])   # one storage: apart or not, eager
    assert not helper._changed_share_memory((x, y), [x, y])


HELPER_CHANGES_ITS_ARGUMENT = """def loss_of(batch):
{change}    return model(batch[0]).pow(2).mean()


for x in data:
    batch = [x]
    opt.zero_grad()
    loss = loss_of(batch)
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("change, expected", [
    ("    batch.pop()\n", r"changes the batch it is handed \(loss_of\(batch\)\)"),   # a second pop fails
    ("    batch[0].mul_(0.5)\n", "changed_inputs=[0]"),   # copied back, as in the loop itself
    ("    batch[0].sum()\n", None),
])
def test_a_function_the_step_hands_the_batch_to_is_read_for_what_it_changes(change, expected, tmp_path):
    """A Hugging Face style ``compute_loss(model, inputs)`` that pops the labels: the warm-up's
    second step failed on the graph's copy of the batch (the sweep's case)."""
    body = HELPER_CHANGES_ITS_ARGUMENT.format(change=change)
    if expected is not None and expected.startswith("changes"):
        with pytest.raises(PatchRefused, match=expected):
            _patched(tmp_path, body)
        return
    patched = _patched(tmp_path, body)
    assert ("changed_inputs=[" in patched) is (expected is not None)
    if expected is not None:
        assert expected in patched


@pytest.mark.parametrize("kept", [
    "smooth = loss.detach() if smooth is None else 0.9 * smooth + 0.1 * loss.detach()",
    "smooth = smooth or loss",
])
def test_a_loss_kept_through_a_conditional_expression_is_copied_out(kept, tmp_path):
    """The first step's loss bound by ``x if c else y``: the next replay would overwrite it."""
    body = (f"smooth = None\nfor x in data:\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n"
            f"    loss.backward()\n    opt.step()\n    {kept}\n")
    assert "clone_outputs=True" in _patched(tmp_path, body)


@pytest.mark.parametrize("body, match", [
    # FGSM: the batch made to require grad before the step, its gradient read inside it
    ("for x in data:\n    x.requires_grad_(True)\n    loss = model(x).pow(2).mean()\n    opt.zero_grad()\n"
     "    loss.backward()\n    adv = (x + 0.1 * x.grad.sign()).detach()\n    opt.zero_grad()\n"
     "    model(adv).pow(2).mean().backward()\n    opt.step()\n", r"gradient of the batch \(x.requires_grad_\(True\)\)"),
    ("for x in data:\n    x.requires_grad = True\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n"
     "    loss.backward()\n    opt.step()\n", r"gradient of the batch \(x.requires_grad = True\)"),
    ("for x in data:\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n"
     "    g, = torch.autograd.grad(loss, x, create_graph=True)\n    (loss + g.pow(2).sum()).backward()\n"
     "    opt.step()\n", r"gradient of the batch \(torch.autograd.grad"),
    ("def step(x):\n    x.requires_grad_(True)\n" + PLAIN_STEP + "\n\n\nfor x in data:\n    loss = step(x)\n",
     r"takes the gradient of what it is handed \(x.requires_grad_\(True\)\)"),
    # through a function of the script's, inside the step
    ("def mark(t):\n    return t.requires_grad_(True)\n\n\nfor x in data:\n    opt.zero_grad()\n    x = mark(x)\n"
     "    loss = model(x).pow(2).mean()\n    loss.backward()\n    opt.step()\n", r"gradient of the batch \(mark\(x\)\)"),
])
def test_a_step_that_takes_the_gradient_of_its_batch_is_refused(body, match, tmp_path):
    """The graph's copy of the batch is detached: FGSM's first warm-up failed on
    ``images.grad`` being None (the sweep's case)."""
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


def test_an_input_made_inside_the_step_may_require_grad(tmp_path):
    """WGAN-GP's interpolates: made inside the step from the batch, not the batch itself."""
    body = ("for x in data:\n    opt.zero_grad()\n    mixed = (0.5 * x).requires_grad_(True)\n"
            "    g, = torch.autograd.grad(model(mixed).sum(), mixed, create_graph=True)\n"
            "    loss = model(x).pow(2).mean() + g.pow(2).sum()\n    loss.backward()\n    opt.step()\n")
    assert "_cg_step_graph(x)" in _patched(tmp_path, body)


ON_THE_GPU_LEAF_INPUT = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(2, 4, device="cuda", requires_grad={requires_grad}) for _ in range(4)]


class Marker:
    def mark(self, x):
        return x.requires_grad_(True)


prep = Marker()
for x in data:
    {prepare}
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
grads = [x.grad for x in data]
"""


@requires_cuda
@pytest.mark.parametrize("requires_grad, prepare, why", [
    ("True", "pass", "is handed a tensor that requires grad"),   # made so before the loop
    ("False", "x = prep.mark(x)", "makes an input require grad"),   # by a method inside the step
])
def test_on_the_gpu_a_batch_that_requires_grad_runs_the_step_eagerly(requires_grad, prepare, why, tmp_path):
    """A leaf made to require grad where the rewrite cannot see it: the helper runs the step
    eagerly, with a warning, so the batch's gradient is eager's."""
    script = ON_THE_GPU_LEAF_INPUT.format(requires_grad=requires_grad, prepare=prepare)
    ran = _eager_and_rewrite(tmp_path, script)
    assert ran[1]["_cg_step_graph"].graph is None and ran[1]["_cg_step_graph"].eager
    assert any(why in message for message in ran[1]["caught"])
    torch.testing.assert_close(ran[0]["model"].weight, ran[1]["model"].weight)
    for a, b in zip(ran[0]["grads"], ran[1]["grads"]):
        torch.testing.assert_close(a, b)


def test_the_helper_shadows_none_of_the_scripts_imports(tmp_path):
    """An EMA loop imports ``copy`` for ``copy.deepcopy(model)``: the helper's own names must
    not shadow it, or the patched script fails the user's linter (pyflakes F402)."""
    from pyflakes.api import check
    from pyflakes.reporter import Reporter

    script = tmp_path / "train.py"
    script.write_text("import copy\nimport math\nimport time\n" + LIVE_OUT.format(
        body="ema = copy.deepcopy(model)\nfor x in data:\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n"
             "    loss.backward()\n    opt.step()\nprint(math.pi, time.time(), ema.weight.sum().item())\n"))
    messages = io.StringIO()
    assert check(make_patch(script, "full_iteration").patched, "patched.py", Reporter(messages, messages)) == 0, \
        messages.getvalue()


def _plain_loop(setup="", loss="model(x).pow(2).mean()", between="") -> str:
    """A loop over ``data`` whose step is zero_grad, ``loss``, backward, ``between``, step."""
    return (f"{setup}for x in data:\n    opt.zero_grad()\n    loss = {loss}\n    loss.backward()\n"
            f"{between}    opt.step()\n")


@pytest.mark.parametrize("kept", [
    "scores.append(out[:, 0].detach())",   # a view of an output, by indexing
    "log.append({k: v.detach() for k, v in parts.items()})",   # a comprehension over an output
    "best = max(best, loss)",   # max hands back one of its arguments
])
def test_an_output_kept_through_an_index_a_comprehension_or_max_is_copied_out(kept, tmp_path):
    """The sweep of 2026-11-30: an AUC computed from the list of the last batch's scores, a
    loss log whose every entry was the last step's, a maximum that was the last norm."""
    body = ("scores, log, best = [], [], 0.0\nfor x in data:\n    opt.zero_grad()\n    out = model(x)\n"
            "    parts = {'mse': out.pow(2).mean()}\n    loss = parts['mse']\n    loss.backward()\n    opt.step()\n"
            f"    {kept}\n")
    assert "clone_outputs=True" in _patched(tmp_path, body)


def test_an_output_read_at_once_is_not_copied_out(tmp_path):
    body = ("log = []\nfor x in data:\n    opt.zero_grad()\n    out = model(x)\n    parts = {'mse': out.pow(2).mean()}\n"
            "    loss = parts['mse']\n    loss.backward()\n    opt.step()\n    log.append(float(max(loss, torch.zeros(()))))\n"
            "    values = {k: v.item() for k, v in parts.items()}\n")
    assert "clone_outputs=True" not in _patched(tmp_path, body)


@pytest.mark.parametrize("around, match", [
    ("opt = torch.optim.SGD(model.parameters(), lr=0.1)", "builds its optimizer again, clears its state"),
    ("opt.state.clear()", "builds its optimizer again, clears its state"),
    ("model.weight.data = model.weight.data / 2", r"gives a tensor new memory \(model.weight.data = \.\.\.\)"),
])
def test_a_loop_that_replaces_what_the_graph_holds_is_refused(around, match, tmp_path):
    """A fresh optimizer per task (continual learning), its state cleared, a weight given new
    memory (NormFace's renormalisation): the graph keeps the old tensors."""
    body = (f"for task in range(2):\n    {around}\n    for x in data:\n        opt.zero_grad()\n"
            "        loss = model(x).pow(2).mean()\n        loss.backward()\n        opt.step()\n")
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


def test_a_new_weight_memory_is_refused_for_fwd_bwd_too(tmp_path):
    body = ("for x in data:\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n    loss.backward()\n"
            "    opt.step()\n    model.weight.data = model.weight.data / 2\n")
    with pytest.raises(PatchRefused, match="gives a tensor new memory"):
        _patched(tmp_path, body, scope="fwd_bwd")


def test_an_attribute_set_on_a_module_the_step_calls_is_refused(tmp_path):
    """A focal loss whose gamma the loop ramps per epoch: its forward reads it, the graph
    would read the capture's value."""
    body = ("class Focal(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.gamma = 0.0\n\n"
            "    def forward(self, out):\n        return out.abs().pow(1 + self.gamma).mean()\n\n\n"
            "criterion = Focal()\nfor epoch in range(2):\n    criterion.gamma = epoch / 2\n    for x in data:\n"
            "        opt.zero_grad()\n        loss = criterion(model(x))\n        loss.backward()\n        opt.step()\n")
    with pytest.raises(PatchRefused, match="sets criterion.gamma outside the step"):
        _patched(tmp_path, body)


@pytest.mark.parametrize("setup, draw, match", [
    ("", "torch.rand(1)", r"torch.rand\(1\) in the step draws random numbers on the host"),
    ("beta = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))\n", "beta.sample()",
     r"beta.sample\(\) in the step samples a distribution built from host tensors"),
    ("from torch.distributions import Beta\nbeta = Beta(torch.tensor([0.4]), torch.tensor([0.4]))\n", "beta.sample()",
     "samples a distribution built from host tensors"),
])
def test_a_random_draw_on_the_host_inside_the_step_is_refused(setup, draw, match, tmp_path):
    """Mixup's ``lam = Beta(...).sample().to(device)``: the capture failed on the copy; a
    ``torch.rand(1)`` would be drawn once, at capture."""
    body = _plain_loop(setup=setup, loss=f"({draw} * model(x)).pow(2).mean()")
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


@pytest.mark.parametrize("setup", [
    "",
    "beta = torch.distributions.Beta(torch.tensor([0.4], device='cuda'), torch.tensor([0.4], device='cuda'))\n",
])
def test_a_draw_on_the_gpu_inside_the_step_is_captured(setup, tmp_path):
    draw = "beta.sample()" if setup else "torch.rand(1, device='cuda')"
    assert "_cg_step_graph(x)" in _patched(tmp_path, _plain_loop(setup=setup, loss=f"({draw} * model(x)).pow(2).mean()"))


STATEFUL_MODULE = """class Flip(nn.Module):
    def __init__(self):
        super().__init__()
        self.updates = 0

    def forward(self, x):
{forward}        return x


flip = Flip()
for x in data:
    opt.zero_grad()
    loss = model(flip(x)).pow(2).mean()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("forward, match", [
    ("        if torch.rand(1) < 0.5:\n            x = x.flip(-1)\n", r"Flip.forward draws random numbers on the host"),
    ("        self.updates += 1\n", r"Flip.forward counts in Python on itself \(self.updates \+= 1\)"),
    ("        x = x * 1.0\n", None),
    # the sweep of 2026-11-30d: a seq2seq's teacher forcing drawn in forward, its outputs
    # made on the host and moved (the capture fails on the copy)
    ("        if random.random() < 0.5:\n            x = x.flip(-1)\n", r"Flip.forward draws random numbers on the host"),
    ("        x = x + torch.zeros(x.shape[-1]).to(x.device)\n", r"Flip.forward copies a tensor made on the host"),
])
def test_a_module_whose_forward_keeps_host_state_is_refused(forward, match, tmp_path):
    """torchvision's ``if torch.rand(1) < self.p`` flip, a temperature annealed from a
    counter in forward: a graph repeats the capture's call."""
    body = "import random\n" + STATEFUL_MODULE.format(forward=forward)
    if match is None:
        assert "_cg_step_graph(x)" in _patched(tmp_path, body)
        return
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


def _eager_and_rewrite(tmp_path, source, scope="full_iteration") -> list:
    """``source`` and its rewrite for ``scope``, each run to its end: their namespaces."""
    eager = tmp_path / "eager.py"
    eager.write_text(source)
    graphed = tmp_path / "graphed.py"
    graphed.write_text(make_patch(eager, scope).patched)
    return [_run_to_its_end(path) for path in (eager, graphed)]


def _same_model_state(ran, **tolerance) -> None:
    for a, b in zip(ran[0]["model"].state_dict().values(), ran[1]["model"].state_dict().values()):
        torch.testing.assert_close(a, b, **tolerance)


ON_THE_GPU_EVAL_MODE = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(16, 4, device="cuda") for _ in range(4)]
model.train()
for epoch in range(3):
    for x in data:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
    model.eval()   # validation, never set back: eager trains on in eval mode
"""


@requires_cuda
def test_on_the_gpu_a_model_left_in_eval_mode_is_captured_again(tmp_path):
    """The sweep of 2026-11-30: the graph kept replaying train mode's BatchNorm after the
    loop put the model in eval mode for good."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_EVAL_MODE)
    _same_model_state(ran)
    assert not any(training for training, _, _ in ran[1]["_cg_step_graph"].modes)   # captured again in eval mode


ON_THE_GPU_STEP_ENDS_IN_EVAL = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.0), nn.Linear(8, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [torch.randn(16, 4, device="cuda") for _ in range(12)]


def train_step(x):
    model.train()
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    model.eval()   # ready for the validation the loop runs between steps
    return loss


total = 0.0
for x in data:
    loss = train_step(x)
    with torch.no_grad():
        total += model(x).sum().item()
print(round(total, 4))
"""


@requires_cuda
def test_on_the_gpu_a_step_that_ends_in_eval_mode_is_captured_once(tmp_path):
    """The modes the capture is checked against are those the step is called in (the rewrite
    sets the mode the step leaves before each replay, as the step's own Python no longer runs),
    and the warm-up's steps, which leave the model in eval, are not what the capture starts from."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_STEP_ENDS_IN_EVAL)
    _same_model_state(ran)
    helper = ran[1]["_cg_step_graph"]
    assert helper.replays == 12 and not any(training for training, _, _ in helper.modes)


ON_THE_GPU_EVER_ANOTHER_SHAPE = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
total = 0.0
for x in [torch.randn(n, 4, device="cuda") for n in range(2, 32)]:
    opt.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    total += loss.item()
print(round(total, 4))
"""


@requires_cuda
def test_on_the_gpu_a_step_never_handed_the_captures_layout_again_says_so(tmp_path):
    """Batches of ever another length: every call after the capture runs eagerly, as it must,
    but no speedup comes of the rewrite, and the user was told nothing."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_EVER_ANOTHER_SHAPE)
    assert ran[0]["total"] == pytest.approx(ran[1]["total"], rel=1e-4)
    assert sum("inputs have differed from those it was captured with for 20 calls" in w for w in ran[1]["caught"]) == 1


ON_THE_GPU_MOVED_AND_BACK = """import io

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
data = [torch.randn(16, 4, device="cuda") for _ in range(6)]
for epoch in range(3):
    for x in data:
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
    model.cpu()   # fast_neural_style's checkpoint: saved from the CPU, then back
    torch.save(model.state_dict(), io.BytesIO())
    model.to("cuda")
"""


@requires_cuda
@pytest.mark.parametrize("scope", ["full_iteration", "fwd_bwd"])
def test_on_the_gpu_a_model_moved_off_the_gpu_and_back_is_captured_again(scope, tmp_path):
    """The sweep of 2026-11-30d: ``model.cpu()`` then ``.to(device)`` gives every parameter new
    storage; the graphs kept reading (and Adam's step writing) the old, and the model stopped
    training."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_MOVED_AND_BACK, scope)
    _same_model_state(ran, rtol=1e-4, atol=1e-5)


def test_another_module_the_step_calls_is_put_back_with_the_models(tmp_path):
    """A mean teacher's ``ema_model(noisy)`` in train mode: the warm-up's forwards move its
    BatchNorm statistics, which the helper restores only for the modules it is handed."""
    body = ("ema_model = nn.Linear(4, 1)\nfor x in data:\n    opt.zero_grad()\n    with torch.no_grad():\n"
            "        target = ema_model(x)\n    loss = (model(x) - target).pow(2).mean()\n    loss.backward()\n"
            "    opt.step()\n")
    assert "_CgFullIterationGraph(_cg_step, [opt], [model, ema_model])" in _patched(tmp_path, body)


VAE_KL = """class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.mu = nn.Linear(4, 1)
        self.kl = torch.zeros(())

    def forward(self, x):
        mu = self.mu(x)
        self.kl = mu.pow(2).mean()
        return mu


model = Encoder()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in data:
    opt.zero_grad()
    loss = model(x).abs().mean() + {read}
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("read, refused", [("model.kl", True), ("model.mu.weight.sum()", False)])
def test_fwd_bwd_refuses_a_loop_that_reads_what_forward_sets_on_its_module(read, refused, tmp_path):
    """A VAE encoder's ``self.kl``, read by the loop: after a graphed forward it is the
    capture's tensor, and the second backward through it failed (the sweep of 2026-11-30)."""
    body = VAE_KL.format(read=read)
    if refused:
        with pytest.raises(PatchRefused, match=r"reads model.kl, which a forward sets on its module \(line \d+\)"):
            _patched(tmp_path, body, scope="fwd_bwd")
    else:
        assert "_cg_graph_forward(model" in _patched(tmp_path, body, scope="fwd_bwd")
    assert "_cg_step_graph" in _patched(tmp_path, body)   # the whole step's graph runs the forward


def test_fwd_bwd_copies_out_a_model_output_a_step_function_returns(tmp_path):
    """An A2C update returns the GRU's new hidden state, which the loop keeps
    (``snapshots.append(hidden)``): it is the graphed forward's output buffer, which the next
    replay overwrites (the sweep's s20 printed other snapshot norms under fwd_bwd)."""
    body = ("def update(x, hidden):\n    opt.zero_grad()\n    out = model(x)\n    loss = out.pow(2).mean()\n"
            "    loss.backward()\n    opt.step()\n    return loss, out\n\n\nsnapshots = []\nhidden = None\n"
            "for x in data:\n    loss, hidden = update(x, hidden)\n    snapshots.append(hidden)\n")
    setup = next(line for line in _patched(tmp_path, body, scope="fwd_bwd").splitlines()
                 if line.startswith("_cg_graph_forward(model"))
    assert "clone_outputs=True" in setup


@pytest.mark.parametrize("around, match", [
    ("opt.load_state_dict(initial)", "builds its optimizer again, clears its state or loads another"),   # k-fold
    ("torch.nn.utils.prune.l1_unstructured(model, 'weight', amount=0.2)", r"adds a hook to a module \(torch.nn"),
    ("model.register_forward_pre_hook(lambda m, a: None)", r"adds a hook to a module \(model.register_forward_pre_hook\)"),
    ("model.drop_p = 0.5 * task", r"sets model.drop_p outside the step"),
])
def test_a_loop_that_changes_around_the_step_what_the_graph_holds_is_refused(around, match, tmp_path):
    """The third sweep of 2026-11-30: folds that load the optimizer's first state (the capture
    again found no momentum yet), pruning between epochs, a callback's dropout rate on the model."""
    body = (f"initial = opt.state_dict()\nfor task in range(2):\n    {around}\n    for x in data:\n        opt.zero_grad()\n"
            "        loss = model(x).pow(2).mean()\n        loss.backward()\n        opt.step()\n")
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


@pytest.mark.parametrize("forward, match", [
    ("        self.center = self.center * 0.9 + x.mean() * 0.1\n", r"Flip.forward keeps state on itself by binding it anew"),
    ("        x = x[:int(self.updates)]\n", r"Flip.forward reads a tensor on the host \(int\(self.updates\)\)"),
    ("        x = x * self.updates.item()\n", r"Flip.forward reads a tensor on the host"),
])
def test_a_module_whose_forward_rebinds_its_state_or_reads_the_host_is_refused(forward, match, tmp_path):
    """DINO's center bound anew in the loss's forward (the graph reads the capture's tensor at
    every replay), MoCo's ``int(self.queue_ptr)`` (a sync the capture fails on)."""
    body = STATEFUL_MODULE.format(forward=forward).replace("self.updates = 0", "self.updates = torch.zeros(())\n"
                                                           "        self.center = torch.zeros(())")
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


@pytest.mark.parametrize("call, match", [
    ("torch.randn(2, 4, generator=gen, device='cuda')", "draws from a generator of its own"),
    ("torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)", "checks the norm on the host"),
])
def test_a_step_with_a_generator_of_its_own_or_a_norm_checked_on_the_host_is_refused(call, match, tmp_path):
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, _plain_loop(setup="gen = torch.Generator(device='cuda')\n", between=f"    {call}\n"))


def test_an_output_handed_to_a_method_of_another_object_is_copied_out(tmp_path):
    """``tracker.update("loss", loss.detach())``: a metric tracker may keep what it is handed."""
    body = ("tracker = {}\nfor x in data:\n    opt.zero_grad()\n    loss = model(x).pow(2).mean()\n    loss.backward()\n"
            "    opt.step()\n    tracker.setdefault('loss', loss.detach())\n")
    assert "clone_outputs=True" in _patched(tmp_path, body)


@pytest.mark.parametrize("body, match", [
    # a KL weight warmed up on the host: the capture takes the CPU scalar as a constant
    ("kl_weight = torch.tensor(0.0)\nfor i, x in enumerate(data):\n    kl_weight.fill_(min(1.0, i / 2))\n"
     "    opt.zero_grad()\n    loss = kl_weight * model(x).pow(2).mean()\n    loss.backward()\n    opt.step()\n",
     "the step reads 'kl_weight', a tensor on the host that the loop changes in place"),
    # Lightning's training_step keeping its outputs on the module
    ("class Lit(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.net = nn.Linear(4, 1)\n"
     "        self.outputs = []\n\n    def forward(self, x):\n        return self.net(x)\n\n"
     "    def training_step(self, x):\n        loss = self(x).pow(2).mean()\n        self.outputs.append(loss.detach())\n"
     "        return loss\n\n\nmodel = Lit()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nfor x in data:\n"
     "    opt.zero_grad()\n    loss = model.training_step(x)\n    loss.backward()\n    opt.step()\n",
     r"training_step\(\) keeps Python state on its object \(self.outputs.append"),
    # a distillation loss whose set_epoch() sets the temperature its forward reads
    ("class KL(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.T = 4.0\n\n"
     "    def set_epoch(self, epoch):\n        self.T = 4.0 / (epoch + 1)\n\n    def forward(self, out):\n"
     "        return (out / self.T).pow(2).mean()\n\n\ncriterion = KL()\nfor epoch in range(2):\n"
     "    criterion.set_epoch(epoch)\n    for x in data:\n        opt.zero_grad()\n        loss = criterion(model(x))\n"
     "        loss.backward()\n        opt.step()\n",
     r"criterion.set_epoch\(epoch\) sets attributes of an object the step calls"),
])
def test_state_a_graph_cannot_follow_is_refused(body, match, tmp_path):
    """The third sweep of 2026-11-30 (bench/workloads/sweep_2026-11-30c/)."""
    with pytest.raises(PatchRefused, match=match):
        _patched(tmp_path, body)


def test_a_host_tensor_the_loop_leaves_alone_is_captured(tmp_path):
    body = _plain_loop(setup="scale = torch.tensor(2.0)\n", loss="scale * model(x).pow(2).mean()")
    assert "_cg_step_graph(x)" in _patched(tmp_path, body)


def test_gradients_cleared_by_a_loop_inside_the_step_are_no_output(tmp_path):
    """The sweep of 2026-11-30e: ``for p in model.parameters(): p.grad = None`` in the step came
    back as ``loss, p.grad = _cg_step_graph(x)``, which assigned the last parameter's gradient
    to whatever ``p`` named before the loop (a crash at the first step), or refused the loop
    for leaving ``p`` unbound."""
    body = ("for x in data:\n    loss = model(x).pow(2).mean()\n    for p in model.parameters():\n"
            "        p.grad = None\n    loss.backward()\n    opt.step()\n")
    out = _patched(tmp_path, body)
    assert "for x in data:\n    _cg_step_graph(x)\n" in out and "        p.grad = None\n" in out


@pytest.mark.parametrize("body", [
    _plain_loop(loss="model(x).pow(2).sum() / n").replace("    opt.zero_grad()\n", "    opt.zero_grad()\n    n = int((x > 0).sum())\n"),
    ("def train_step(x, n):\n    opt.zero_grad()\n    loss = model(x).pow(2).sum() / n\n    loss.backward()\n"
     "    opt.step()\n\n\nfor x in data:\n    train_step(x, (x > 0).sum().item())\n"),
])
def test_a_number_read_from_a_tensor_each_iteration_refuses_full_iteration(body, tmp_path):
    """The sweep of 2026-11-30e: a summed loss divided by ``int(mask.sum())``, handed to the step
    function, went in as a Python input of another value at each call: every step ran eagerly;
    read in the step itself, ``int()`` of a tensor was captured, a sync no capture survives."""
    with pytest.raises(PatchRefused, match="Python number|host sync"):
        _patched(tmp_path, body)


def test_a_host_tensor_made_with_new_tensor_in_the_step_is_refused(tmp_path):
    """The sweep of 2026-11-30d: fast_neural_style's ``batch.new_tensor([0.485, ...])`` copies a
    Python list to the GPU, which no capture can (``torch.tensor(..., device=...)`` was refused)."""
    with pytest.raises(PatchRefused, match=r"x.new_tensor\(\[0.5, 0.5, 0.5, 0.5\]\) copies a tensor made on the host"):
        _patched(tmp_path, _plain_loop(loss="(model(x - x.new_tensor([0.5, 0.5, 0.5, 0.5]))).pow(2).mean()"))


def test_a_boolean_mask_in_a_method_of_the_loops_own_class_is_refused(tmp_path):
    """The sweep of 2026-11-30d: SimCLR's trainer computes its loss in ``self.info_nce_loss``,
    which drops the diagonal with ``similarity[~mask]``; the step's own statements were checked,
    the method it calls was not, and the capture failed on the sync."""
    body = ("class Trainer:\n    def loss_of(self, out):\n        mask = torch.eye(out.shape[0], device=out.device).bool()\n"
            "        return out[~mask].pow(2).mean()\n\n    def fit(self):\n        for x in data:\n"
            "            opt.zero_grad()\n            loss = self.loss_of(model(x) @ model(x).T)\n"
            "            loss.backward()\n            opt.step()\n\n\nTrainer().fit()\n")
    with pytest.raises(PatchRefused, match=r"out\[~mask\] in the step is indexing by a boolean mask"):
        _patched(tmp_path, body)


def test_batches_picked_from_tensors_made_from_gpu_tensors_with_their_size_read_are_hoisted(tmp_path):
    """The sweep of 2026-11-30e: ``for i in range(X.size(0))`` was refused because the loop
    "reads X otherwise too" (its size), and labels made from the GPU features
    (``(X @ W).argmax(-1)``) were "not bound to a tensor on the GPU"."""
    body = ("X = torch.randn(8, 16, 4, device='cuda')\nW = torch.randn(4, 3, device='cuda')\nY = (X @ W).argmax(-1)\n"
            "for i in range(X.size(0)):\n    opt.zero_grad()\n    loss = (model(X[i]) - Y[i]).pow(2).mean()\n"
            "    loss.backward()\n    opt.step()\n")
    out = _patched(tmp_path, body)
    assert "    _cg_X = X[i]\n    _cg_Y = Y[i]\n    _cg_step_graph(_cg_X, _cg_Y)\n" in out


@pytest.mark.parametrize("built, refused", [("torch.optim.AdamW(model.parameters())", False),
                                           ("AdaHessian(model.parameters())", True)])
def test_timms_create_graph_of_a_torch_optimizers_second_order_flag_is_no_double_backward(built, refused, tmp_path):
    """timm's ``loss.backward(create_graph=second_order)``, ``second_order = hasattr(optimizer,
    'is_second_order') and optimizer.is_second_order``: False for every optimizer torch builds,
    and fwd_bwd was refused for every timm-style loop (the sweep of 2026-11-30d)."""
    body = (f"optimizer = {built}\nsecond_order = hasattr(optimizer, 'is_second_order') and optimizer.is_second_order\n"
            "for x in data:\n    optimizer.zero_grad()\n    loss = model(x).pow(2).mean()\n"
            "    loss.backward(create_graph=second_order)\n    optimizer.step()\n")
    if refused:
        with pytest.raises(PatchRefused, match="differentiates"):
            _patched(tmp_path, body, "fwd_bwd")
    else:
        assert "_cg_graph_forward(model" in _patched(tmp_path, body, "fwd_bwd")


def test_a_batch_size_read_as_a_number_in_the_step_is_no_sync(tmp_path):
    """``n = int(x.size(0))``: a size is the host's already, no tensor read, and one that
    changes comes with a batch of another shape, which runs eagerly anyway."""
    body = _plain_loop(loss="model(x).pow(2).sum() / n").replace("    opt.zero_grad()\n", "    opt.zero_grad()\n    n = int(x.size(0))\n")
    assert "    n = int(x.size(0))\n    _cg_step_graph(x, n)\n" in _patched(tmp_path, body)   # read before the replay


def test_a_zero_grad_after_the_step_stays_after_the_replay(tmp_path):
    """The sweep of 2026-11-30f: ``optimizer.zero_grad(set_to_none=False)`` at the end of the
    body was taken out with the step's own, and the gradients printed after the loop were the
    last step's where eager's are zeros."""
    body = ("for x in data:\n    loss = model(x).pow(2).mean()\n    loss.backward()\n    opt.step()\n"
            "    opt.zero_grad(set_to_none=False)\nprint(model.weight.grad.abs().sum().item())\n")
    assert "    _cg_step_graph(x)\n    opt.zero_grad(set_to_none=False)\n" in _patched(tmp_path, body)


def test_torchvisions_finite_loss_guard_runs_after_the_replay(tmp_path):
    """torchvision's train_one_epoch reads the loss on the host and exits on a non-finite one
    before its backward (``loss_dict_reduced = {k: v.item() ...}``, ``loss_value =
    sum(loss_dict_reduced.values())``, ``if not math.isfinite(loss_value): sys.exit(1)``):
    refused before, as a read that "fed the step"; all of it runs after the replay now."""
    body = ("import math\nimport sys\nfor x in data:\n    parts = {'a': model(x).pow(2).mean(), 'b': model(x).abs().mean()}\n"
            "    loss = sum(parts.values())\n    reduced = {k: v.item() for k, v in parts.items()}\n"
            "    value = sum(reduced.values())\n    if not math.isfinite(value):\n        print(reduced)\n"
            "        sys.exit(1)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n")
    out = _patched(tmp_path, body)
    assert ("    parts = _cg_step_graph(x)  # cg-advise: replays the captured step\n"
            "    reduced = {k: v.item() for k, v in parts.items()}\n    value = sum(reduced.values())\n"
            "    if not math.isfinite(value):\n") in out


CHECKPOINTED = """from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Linear(4, 4)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False{keeps}).sum(-1)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x in data:
    opt.zero_grad()
    loss = net(x).pow(2).mean()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize("version, keeps, refused", [
    ((2, 5), "", True), ((2, 5), ", preserve_rng_state=False", False), ((2, 11), "", False)])
@pytest.mark.parametrize("scope", ["full_iteration", "fwd_bwd"])
def test_a_checkpoint_keeping_the_rng_state_refuses_the_graphs_before_torch_2_11(version, keeps, refused, scope,
                                                                                 tmp_path, monkeypatch):
    """The sweep of 2026-11-30f: torch.utils.checkpoint reads the CUDA generator's state, which
    torch refused during a capture before 2.11 (pytorch/pytorch#83148); on the H200's 2.11 a
    checkpointed dropout captured and replayed its forward's mask."""
    monkeypatch.setattr("tuner.patch.installed_torch_version", lambda: version)
    body = CHECKPOINTED.format(keeps=keeps)
    if refused:
        with pytest.raises(PatchRefused, match="torch.utils.checkpoint keeps the RNG state, which torch 2.5 cannot"):
            _patched(tmp_path, body, scope)
    else:
        assert "_cg_" in _patched(tmp_path, body, scope)


def test_a_scripts_own_checkpoint_function_is_no_torch_checkpoint(tmp_path, monkeypatch):
    """pytorch/examples' super_resolution saves its model in a ``checkpoint(epoch)`` of its own."""
    monkeypatch.setattr("tuner.patch.installed_torch_version", lambda: (2, 5))
    body = "def checkpoint(epoch):\n    torch.save(model.state_dict(), 'm.pt')\n\n\n" + _plain_loop() + "checkpoint(0)\n"
    assert "_cg_step_graph(x)" in _patched(tmp_path, body)


HAND_WRITTEN_UPDATE = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)){device}
data = [torch.randn(16, 4{on}) for _ in range(6)]


def train():
    for x in data:
        model.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)   # the word-language-model example's update


lr = {lr}
SCALE = 2.0
for epoch in range(4):
    train()
    {decay}
print(lr)
"""


def _hand_written(decay="lr /= 4.0", lr="0.05", cuda=False) -> str:
    return HAND_WRITTEN_UPDATE.format(device=".cuda()" if cuda else "", on=', device="cuda"' if cuda else "",
                                      lr=lr, decay=decay)


@pytest.mark.parametrize("decay, watched", [
    ("lr /= 4.0", "watched=lambda: (lr,)"),          # pytorch/examples' word_language_model
    ("lr = lr * 0.5", "watched=lambda: (lr,)"),      # bound a second time at the top level
    ("pass", None),                                  # bound once: a constant for the graph
])
def test_a_global_the_script_binds_anew_is_watched_by_the_full_iteration_graph(decay, watched, tmp_path):
    """The sweep of 2026-11-30d: the word-language-model example divides its global ``lr`` by 4
    between epochs, and its hand-written update inside the step reads it; the graph kept the
    first learning rate, and the run diverged from eager's. The helper now captures again when
    such a global has changed."""
    script = tmp_path / "train.py"
    script.write_text(_hand_written(decay))
    out = make_patch(script, "full_iteration").patched
    assert "_CgFullIterationGraph(_cg_step" in out
    if watched:
        assert watched in out
    else:
        assert "watched=" not in out.split("class _CgFullIterationGraph")[1].split("_cg_step_graph = ")[1]


def test_rebound_globals_counts_top_level_bindings_loops_augmented_and_global_statements():
    import libcst

    from tuner.dataflow import rebound_globals
    module = libcst.parse_module(
        "import math\nfrom os import path as p\nA = 1\nB = 1\nB = 2\nC = 1\nC += 1\nfor D in range(3):\n    E = D\n"
        "F = 1\ndef f():\n    global F\n    F = 2\nclass G:\n    pass\nH = 0\nif H:\n    H = 1\n"
        "with open('x') as I:\n    pass\n")
    names = {"math", "p", "A", "B", "C", "D", "E", "F", "G", "H", "I", "f", "undefined"}
    assert rebound_globals(module, names) == ["B", "C", "D", "E", "F", "H"]


ON_THE_GPU_LR_DECAYED_BY_A_FUNCTION = """import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1)).cuda()
data = [torch.randn(16, 4, device="cuda") for _ in range(12)]   # more replays than a quick change counts
lr = 0.05


def decay():
    global lr
    lr /= 4.0


for epoch in range(4):
    for x in data:
        model.zero_grad()
        loss = model(x).pow(2).mean()
        loss.backward()
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
    decay()
"""


@requires_cuda
def test_on_the_gpu_a_learning_rate_divided_between_epochs_reaches_the_graph(tmp_path):
    """One graph for the whole run (the loop at the top level), ``lr`` divided by a function
    under ``global`` between epochs: the graph captured at the first step kept 0.05 to the end."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_LR_DECAYED_BY_A_FUNCTION)
    _same_model_state(ran, rtol=1e-4, atol=1e-5)
    assert ran[1]["_cg_step_graph"].watched_values == (0.05 / 4 ** 3,)


def test_a_trainer_methods_loop_gets_its_model_graphed_by_fwd_bwd_and_its_call_captured_by_full_iteration(tmp_path):
    """A Trainer's ``fit`` looping over ``self.train_step(batch)`` (sweep f): fwd_bwd graphs
    ``self.model`` in ``fit``, before its loop; full_iteration captures the method's call whole,
    as a step function's, the helper made in ``fit``."""
    from test_discover import TRAINER_CLASS
    script = tmp_path / "train.py"
    script.write_text(TRAINER_CLASS)
    out = make_patch(script, "fwd_bwd").patched
    assert "    def fit(self, batches):\n        _cg_graph_forward(self.model, accumulate=True)" in out
    out = make_patch(script, "full_iteration").patched
    assert ("    def fit(self, batches):\n        _cg_step_graph = _CgFullIterationGraph(self.train_step, "
            "[self.optimizer], [self.model])\n\n        for batch in batches:\n"
            "            loss = _cg_step_graph(batch)  # cg-advise: replays the captured train_step()\n") in out


def test_a_step_method_returning_a_dict_of_what_it_computes_is_captured_whole(tmp_path):
    """sweep f's Trainer returns ``{"loss": loss.detach(), "acc": acc, ...}``: the replay writes
    each value again, as a tuple's (refused before as a Python value)."""
    from test_discover import TRAINER_CLASS
    script = tmp_path / "train.py"
    script.write_text(TRAINER_CLASS.replace("        return loss.detach()",
                                            '        return {"loss": loss.detach(), "undetached": loss}'))
    assert "_CgFullIterationGraph(self.train_step" in make_patch(script, "full_iteration").patched
    script.write_text(TRAINER_CLASS.replace("        return loss.detach()",
                                            '        return {"loss": loss.detach(), "lr": self.optimizer.param_groups[0]["lr"]}'))
    with pytest.raises(PatchRefused, match="a replay cannot update"):
        make_patch(script, "full_iteration")


TRAINER_STATE = """import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scale, self.seen = 1.0, 0
{methods}
    def train_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad()
        loss = {loss}
        loss.backward()
        self.optimizer.step(){more}
        return loss.detach()

    def fit(self, batches):
        for batch in batches:
            loss = self.train_step(batch){loop}
        return loss
{classes}

model = nn.Linear(4, 1)
trainer = Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1))
trainer.fit([(torch.randn(2, 4), torch.randn(2, 1))] * 8)
"""

MSE = "nn.functional.mse_loss(self.model(x), y)"


@pytest.mark.parametrize("parts, why", [
    ({"more": "\n        self.last = loss.detach()"}, "it sets self.last, Python state"),
    ({"loss": f"{MSE} * self.scale", "loop": "\n            self.scale = 0.5"},
     "it reads self.scale, which the loop or a method it calls sets"),
    # a method the loop calls anneals the weight
    ({"loss": f"{MSE} * self.scale", "loop": "\n            self.anneal()",
      "methods": "\n    def anneal(self):\n        self.scale *= 0.9\n"},
     "it reads self.scale, which the loop or a method it calls sets"),
    ({"more": "\n        self.ema.mul_(0.9).add_(loss.detach())"}, "it changes a tensor of self's in place"),
    # sweep g: a property the step reads, computed from a counter the loop moves (a KL warm-up)
    ({"loss": f"{MSE} * self.weight", "loop": "\n            self.seen += 1",
      "methods": "\n    @property\n    def weight(self):\n        return min(1.0, self.seen / 10)\n"},
     "it reads self.seen, which the loop or a method it calls sets"),
    # sweep g: a method the step calls reads the weight the loop anneals
    ({"loss": f"self.weigh({MSE})", "loop": "\n            self.scale *= 0.9",
      "methods": "\n    def weigh(self, loss):\n        return loss * self.scale\n"},
     "it reads self.scale, which the loop or a method it calls sets"),
    # sweep g: a subclass overrides the step the base class's loop calls
    ({"classes": "\n\nclass Mixup(Trainer):\n    def train_step(self, batch):\n        return batch\n"},
     "in Mixup, a subclass of Trainer, self.train_step() is another method"),
    ({"loop": "\n            log(self)"}, "log(self) reaches self otherwise than through self.<name>"),
    ({"more": "\n        self.scaler.unscale_(self.optimizer)"}, "a GradScaler or a scheduler steps inside it"),
    # the review of 2026-11-30e: what a reading of self.<name> alone would miss
    ({"loss": f"{MSE} * getattr(self, 'scale')"}, "getattr(self, 'scale') reaches self otherwise"),
    ({"loss": f"{MSE} * self.scale", "loop": "\n            t = self\n            t.scale *= 0.5"},
     "t = self reaches self otherwise"),
    ({"loss": f"{MSE} * self.scale", "loop": "\n            self.scale, self.seen = 0.5, 1"},
     "it reads self.scale, which the loop or a method it calls sets"),
    ({"loss": f"{MSE} * self.a()", "loop": "\n            self.scale *= 0.5",   # three calls deep
      "methods": "\n    def a(self):\n        return self.b()\n\n    def b(self):\n        return self.c()\n\n"
                 "    def c(self):\n        return self.scale\n"},
     "it reads self.scale, which the loop or a method it calls sets"),
    ({"loss": f"{MSE} * self.weight()", "methods": "\n    def weight(self):\n        return 1.0\n",
      "classes": "\n\nclass Warm(Trainer):\n    def weight(self):\n        return min(1.0, self.seen / 10)\n"},
     "in Warm, a subclass of Trainer, self.weight() is another method"),
    ({"more": "\n        lr = self.optimizer.param_groups[0]['lr']",
      "loop": ""}, None),   # see below: a returned Python value
])
def test_a_trainer_method_whose_object_state_a_graph_would_hold_is_not_captured(parts, why, tmp_path):
    """What the step reads of ``self`` that the loop, or a method the loop calls, sets (a step
    counter, a weight annealed each epoch), in the method, a method it calls or a property it
    reads (sweep g's KL warm-up, an auxiliary weight), or sets itself, would be the capture's
    value at every replay; a subclass's override is another step."""
    script = tmp_path / "train.py"
    source = TRAINER_STATE.format(**{"methods": "", "loss": MSE, "more": "", "loop": "", "classes": "", **parts})
    if why is None:   # a dict that returns a learning rate read in the step: the helper cannot hand it back
        source, why = source.replace("        return loss.detach()", '        return {"loss": loss.detach(), "lr": lr}'), \
            "it returns lr, a Python value"
    script.write_text(source)
    with pytest.raises(PatchRefused, match=re.escape(why)):
        make_patch(script, "full_iteration")


def test_a_trainer_deriving_from_a_class_defined_elsewhere_is_not_captured_through_its_methods(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINER_STATE.format(methods="", loss=f"{MSE} * self.weight()", more="", loop="", classes="")
                      .replace("class Trainer:", "from base import Base\n\n\nclass Trainer(Base):"))
    with pytest.raises(PatchRefused, match=re.escape("it calls self.weight(), which Trainer takes from Base")):
        make_patch(script, "full_iteration")


def test_a_static_step_method_is_refused_saying_so(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINER_STATE.format(methods="", loss=MSE, more="", loop="", classes="").replace(
        "    def train_step(self, batch):", "    @staticmethod\n    def train_step(self, batch):"))
    with pytest.raises(PatchRefused, match="a static or class method"):
        make_patch(script, "full_iteration")


def test_a_watched_global_hidden_by_a_local_of_the_calling_function_is_read_from_the_globals(tmp_path):
    """The review of 2026-11-30e: the helper made inside ``run(beta)`` would have read its
    parameter, not the global the step function reads (bound twice at the top level)."""
    script = tmp_path / "train.py"
    script.write_text("import torch\nfrom torch import nn\n\nmodel = nn.Linear(4, 1)\n"
                      "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nbeta = 1.0\nbeta = 0.5\n\n\n"
                      "def step(x):\n    opt.zero_grad()\n    loss = model(x).pow(2).mean() * beta\n"
                      "    loss.backward()\n    opt.step()\n    return loss.detach()\n\n\n"
                      "def run(data, beta):\n    for x in data:\n        loss = step(x)\n\n\n"
                      "run([torch.randn(2, 4)] * 4, 0.25)\n")
    assert 'watched=lambda: (globals()["beta"],)' in make_patch(script, "full_iteration").patched


@pytest.mark.parametrize("parts", [
    {},
    {"loss": f"{MSE} * self.scale"},   # set in __init__ only
    # set by a method that runs before the loop's method, not while its graph lives (sweep g's
    # research trainer: fit() builds the optimizer, then calls train_epoch())
    {"loss": f"{MSE} * self.scale", "methods": "\n    def configure(self):\n        self.scale = 0.5\n"},
])
def test_a_trainer_method_reading_state_nothing_changes_while_it_replays_is_captured(parts, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAINER_STATE.format(**{"methods": "", "loss": MSE, "more": "", "loop": "", "classes": "", **parts}))
    assert "_CgFullIterationGraph(self.train_step" in make_patch(script, "full_iteration").patched


ON_THE_GPU_TRAINER = """import torch
from torch import nn

torch.manual_seed(0)


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def train_step(self, batch):
        x, y = batch
        self.optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        norm = torch.cat([p.grad.flatten() for p in self.model.parameters()]).norm()
        return {"loss": loss.detach(), "norm": norm}

    def fit(self, batches, epochs):
        history = []
        for epoch in range(epochs):
            for batch in batches:
                history.append(self.train_step(batch))
        return torch.stack([h["loss"] for h in history] + [h["norm"] for h in history])


model = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.Linear(16, 1)).cuda()
trainer = Trainer(model, torch.optim.AdamW(model.parameters(), lr=1e-2))
losses = trainer.fit([(torch.randn(8, 4, device="cuda"), torch.randn(8, 1, device="cuda")) for _ in range(5)], 3)
"""


@requires_cuda
@pytest.mark.parametrize("scope", ["full_iteration", "fwd_bwd"])
def test_on_the_gpu_a_trainer_methods_loop_trains_as_eager(scope, tmp_path):
    """Each loss the loop keeps is the one eager computed (full_iteration copies the replay's
    output out, as the loop keeps it past the next replay)."""
    ran = _eager_and_rewrite(tmp_path, ON_THE_GPU_TRAINER, scope)
    _same_model_state(ran, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(ran[0]["losses"], ran[1]["losses"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("body, calls", [
    ("if cond:\n    y = model(x)\nelse:\n    y = model(x, h)\n", 1),          # word_language_model's two branches
    ("if cond:\n    y = model(x)\nelif other:\n    y = model(x)\nelse:\n    y = model(h)\n", 1),
    ("y = model(x)\nif cond:\n    z = model(y)\n", 2),
    ("for chunk in xs:\n    y = model(chunk)\n", 2),                         # a loop inside: more than once
    ("try:\n    y = model(x)\nexcept RuntimeError:\n    y = model(x[:1])\n", 2),   # the body's call may have run
    ("with ctx:\n    y = model(model(x))\n", 2),
    ("y = torch.cat([model(c) for c in x.chunk(4)])\n", 2),          # a comprehension runs it any number of times
    ("if cond:\n    y = sum(model(c).sum() for c in xs)\nelse:\n    y = model(x)\n", 2),
])
def test_calls_on_one_path_takes_branches_as_alternatives(body, calls):
    import libcst

    from tuner.dataflow import calls_on_one_path
    assert calls_on_one_path(libcst.parse_module(body).body, "model") == calls


def test_a_model_called_in_both_branches_of_an_if_is_graphed_by_fwd_bwd(tmp_path):
    """pytorch/examples' word_language_model calls its model in the ``if`` of a Transformer and
    in the ``else`` of an RNN: once an iteration, refused before as called twice."""
    script = tmp_path / "train.py"
    script.write_text(LIVE_OUT.format(body="for x in data:\n    opt.zero_grad()\n    if x.dim() > 1:\n"
                                           "        out = model(x)\n    else:\n        out = model(x[None])\n"
                                           "    loss = out.pow(2).mean()\n    loss.backward()\n    opt.step()\n"))
    assert "_cg_graph_forward(model)" in make_patch(script, "fwd_bwd").patched


@pytest.mark.parametrize("built, in_graph", [
    ("torch.optim.AdamW(self.model.parameters(), lr=1e-3)", True),
    ("Custom(self.model.parameters())", False),   # a class cg-advise does not know: its step stays eager
])
def test_an_optimizer_a_trainer_method_builds_is_judged_by_what_the_method_returns(built, in_graph, tmp_path):
    """Sweep g's research trainer builds its optimizer in ``self.configure_optimizers()``: refused
    before as an optimizer class cg-advise did not know."""
    source = TRAINER_STATE.format(methods=f"\n    def configure_optimizers(self):\n        return {built}\n", loss=MSE,
                                  more="", loop="", classes="\n\nclass Custom(torch.optim.SGD):\n    pass\n")
    source = source.replace("        self.model, self.optimizer = model, optimizer\n",
                            "        self.model = model\n        self.optimizer = self.configure_optimizers()\n")
    script = tmp_path / "train.py"
    script.write_text(source)
    try:
        out = make_patch(script, "full_iteration").patched
    except PatchRefused as refused:
        assert not in_graph and "its optimizer cannot step inside a graph" in str(refused)
    else:
        assert in_graph and "_CgFullIterationGraph(self.train_step, [self.optimizer], [self.model])" in out
