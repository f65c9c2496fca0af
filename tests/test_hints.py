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
])
def test_a_hint_to_a_refused_scope_is_taken_out(message, expected):
    refused = ("full_iteration", "compile", "fwd_bwd")
    assert without_hints_to(message, refused) == expected


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
