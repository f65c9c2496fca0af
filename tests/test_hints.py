"""A refusal's advice to try another scope is checked on the same script (tuner/hints.py)."""
import pytest

from conftest import ROOT
from tuner.hints import checked_hints, without_hints_to
from tuner.patch import PATCH_SCOPES, PatchRefused, make_patch

SCOPES = ("fwd_bwd", "full_iteration", "submodule", "compile")


@pytest.mark.parametrize("message, expected", [
    ("called twice (try --scope full_iteration)", "called twice"),
    ("a Python value (pass it as a tensor, or try --scope compile)", "a Python value (pass it as a tensor)"),
    ("the all-reduce (use fwd_bwd: DDP all-reduces each eagerly) at the end", "the all-reduce at the end"),
    ("overwrites gradients it accumulates; use fwd_bwd, which copies them", "overwrites gradients it accumulates"),
    ("no forward (try --scope full_iteration or submodule)", "no forward (try --scope submodule)"),
    # each clause to where it ends at its own depth of parentheses (a review's cases)
    ("X; use fwd_bwd, which copies them (see pytorch#1)", "X"),
    ("foo, or try --scope compile. Bar (baz) qux", "foo. Bar (baz) qux"),
    ("the all-reduce (use fwd_bwd: DDP all-reduces (each) eagerly) at the end", "the all-reduce at the end"),
    ("(do A or try --scope compile)", "(do A)"),
    ("foo: use fwd_bwd", "foo"),
    ("(pytorch/pytorch#139476; try --scope fwd_bwd)", "(pytorch/pytorch#139476)"),
    # no hint: words that end in "use", a scope's name quoted in a sentence, "or" and a word that is no scope
    ("fails because compile's graphs overwrite them", "fails because compile's graphs overwrite them"),
    ("we reuse fwd_bwd weights", "we reuse fwd_bwd weights"),
    ("models use compile hooks", "models use compile hooks"),
    ("foo (try --scope submodule or keep it eager)", "foo (try --scope submodule or keep it eager)"),
])
def test_a_hint_to_a_refused_scope_is_taken_out(message, expected):
    refused = ("full_iteration", "compile", "fwd_bwd")
    assert without_hints_to(message, refused, SCOPES) == expected


def test_the_refused_scope_s_reason_is_said_in_place_of_the_hint():
    reasons = {"full_iteration": "a host sync inside the step", "submodule": None}
    message = "model is called twice (try --scope full_iteration)"
    assert checked_hints(message, "fwd_bwd", SCOPES, reasons.get) == (
        "model is called twice; full_iteration does not apply either: a host sync inside the step")


def test_a_hint_to_a_scope_that_applies_stays_and_words_that_are_no_scope_are_left_alone():
    message = "sparse gradients (use sparse tensors elsewhere, or try --scope compile)"
    asked = []

    def refusal_of(scope):
        asked.append(scope)

    assert checked_hints(message, "fwd_bwd", SCOPES, refusal_of) == message
    assert asked == ["compile"]


def test_a_reason_said_in_place_of_a_hint_keeps_no_hint_of_its_own_to_a_refused_scope():
    # submodule -> full_iteration, whose own refusal points at fwd_bwd, which refuses too
    reasons = {"full_iteration": "the step runs inside a call (try --scope fwd_bwd)", "fwd_bwd": "called twice",
               "compile": None}
    message = "called twice (try --scope full_iteration)"
    assert checked_hints(message, "submodule", SCOPES, reasons.get) == (
        "called twice; full_iteration does not apply either: the step runs inside a call")
    reasons["full_iteration"] = "the step runs inside a call (try --scope compile)"   # compile applies: kept
    assert checked_hints(message, "submodule", SCOPES, reasons.get).endswith("inside a call (try --scope compile)")


def refusal(path, scope) -> str:
    with pytest.raises(PatchRefused) as refused:
        make_patch(path, scope)
    return str(refused.value)


def test_a_gan_trainer_s_two_refusals_no_longer_send_the_user_from_one_to_the_other():
    # both scopes refuse: fwd_bwd said "try --scope full_iteration", whose refusal said "try --scope fwd_bwd"
    script = ROOT / "bench" / "workloads" / "sweep_2026-11-30g" / "gan_train_d_train_g.py"
    fwd_bwd, full_iteration = refusal(script, "fwd_bwd"), refusal(script, "full_iteration")
    assert "try --scope" not in fwd_bwd and "try --scope" not in full_iteration
    assert "try --scope" not in refusal(script, "submodule")   # its hint's reason pointed at fwd_bwd
    assert fwd_bwd.endswith("; full_iteration does not apply either: line 42: the step runs inside train_d(), which "
                            "no graph can hold: the loop runs backward() or an optimizer step outside the call too")
    assert full_iteration.endswith("; fwd_bwd does not apply either: self.D is called more than once per iteration; "
                                   "a graphed forward keeps the activations of one call for its backward")


def test_a_hint_to_a_scope_that_takes_the_loop_is_kept():
    script = ROOT / "tests" / "corpus" / "shared_encoder_twice.py"
    assert refusal(script, "fwd_bwd").endswith("(try --scope full_iteration)")
    make_patch(script, "full_iteration")


@pytest.mark.parametrize("name", ["actor_critic", "wgan_gradient_penalty", "contrastive_simclr"])
def test_no_corpus_refusal_points_at_a_scope_that_refuses_the_same_loop(name):
    script = ROOT / "tests" / "corpus" / f"{name}.py"
    for scope in PATCH_SCOPES:
        try:
            make_patch(script, scope)
        except PatchRefused as refused:
            for hinted in SCOPES:
                if f"try --scope {hinted}" in str(refused) or f"use {hinted}" in str(refused):
                    make_patch(script, hinted)   # applies, or this test fails with its refusal


def test_a_hinted_scope_that_fails_otherwise_leaves_the_refusal_as_it_was(monkeypatch):
    # trying the hinted scope raises something else than a refusal: the user still gets the refusal
    from tuner import patch

    script = ROOT / "bench" / "workloads" / "sweep_2026-11-30g" / "gan_train_d_train_g.py"
    real = patch._make_patch

    def failing(path, scope, source, spec):
        if scope == "full_iteration":
            raise RuntimeError("a bug in the full_iteration rewrite")
        return real(path, scope, source, spec)

    monkeypatch.setattr(patch, "_make_patch", failing)
    assert refusal(script, "fwd_bwd").endswith("(try --scope full_iteration)")


def test_the_refused_scope_is_not_tried_again_for_a_reason_that_points_back_at_it():
    asked = []

    def refusal_of(scope):
        asked.append(scope)
        return {"full_iteration": "inside a call (try --scope fwd_bwd)"}.get(scope)

    checked_hints("called twice (try --scope full_iteration)", "fwd_bwd", SCOPES, refusal_of)
    assert asked == ["full_iteration"]


def test_a_ddp_model_called_twice_is_pointed_at_the_whole_step_with_the_all_reduce_outside(tmp_path):
    # under DDP full_iteration is not offered (capturing the all-reduce inside the graph hung)
    script = tmp_path / "twice.py"
    script.write_text(
        "import torch\nimport torch.distributed as dist\nfrom torch import nn\n"
        "from torch.nn.parallel import DistributedDataParallel\n\ndist.init_process_group('nccl')\n"
        "ddp_model = DistributedDataParallel(nn.Linear(8, 8).cuda())\n"
        "optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.01)\n"
        "for x in [torch.randn(4, 8, device='cuda') for _ in range(10)]:\n"
        "    loss = ddp_model(ddp_model(x)).square().mean()\n    loss.backward()\n    optimizer.step()\n"
        "    optimizer.zero_grad()\n")
    assert refusal(script, "fwd_bwd").endswith("(try --scope full_iteration_allreduce_outside)")
    make_patch(script, "full_iteration_allreduce_outside")


def test_an_inference_loop_is_pointed_at_compile(tmp_path):
    # an inference loop has no step to capture; its forward returns a distribution no graph hands back
    script = tmp_path / "policy.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\n\nclass Policy(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(8, 8)\n\n    def forward(self, x):\n"
        "        return torch.distributions.Categorical(logits=self.fc(x))\n\n\n"
        "model = Policy().cuda().eval()\nwith torch.no_grad():\n    for _ in range(20):\n"
        "        action = model(torch.randn(4, 8, device='cuda')).sample()\n")
    assert refusal(script, "forward").endswith("or try --scope compile)")
    make_patch(script, "compile")
