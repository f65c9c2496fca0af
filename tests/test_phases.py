"""Phases of the iteration on real `cg-advise profile` exports, against plain SQL written here."""

import statistics

import pytest

from advisor.analysis import analyse
from advisor.trace import open_trace
from conftest import sample, sql

PROFILED = ["zoo_mlp_profiled", "zoo_cnn_amp_profiled", "zoo_hf_bert_profiled", "corpus_momentum_encoder_profiled",
            "corpus_gan_profiled", "corpus_fixmatch_profiled", "corpus_ddpm_profiled"]

# each iteration range with the next one's start (the CPU window), in the order they ran
ITERATIONS = """
SELECT n.start, n.end, LEAD(n.start) OVER (ORDER BY n.start)
FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value = 'cg-advise:iteration' ORDER BY n.start
"""
RANGES = """
SELECT n.start, n.end, n.globalTid FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
WHERE s.value = ? ORDER BY n.start
"""
SYNCS = """
SELECT r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
WHERE s.value GLOB 'cudaStreamSynchronize*' OR s.value GLOB 'cudaDeviceSynchronize*'
   OR s.value GLOB 'cudaEventSynchronize*' OR s.value GLOB 'cudaMemcpy_v*' OR s.value = 'cudaMemcpy'
"""
SYNCS_BY_THREAD = SYNCS.replace("SELECT r.start, r.end", "SELECT r.start, r.globalTid")
# GPU operations launched by a runtime call inside an optimizer range of the same thread
OPTIMIZER_OPS = """
WITH opt AS (
  SELECT n.start, n.end, n.globalTid FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId
  WHERE s.value = 'cg-advise:optimizer'
), ops AS ({ops})
SELECT r.start FROM ops JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = ops.correlationId AND (r.globalTid & -16777216) = ops.globalPid
JOIN opt ON r.start >= opt.start AND r.start <= opt.end AND r.globalTid = opt.globalTid
"""


def optimizer_ops_sql(path):
    tables = {name for (name,) in sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    kinds = [t for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")
             if t in tables]
    return OPTIMIZER_OPS.format(ops=" UNION ALL ".join(f"SELECT correlationId, globalPid FROM {t}" for t in kinds))


def windows(path):
    rows = sql(path, ITERATIONS)
    return [(start, end, following if following is not None else end) for start, end, following in rows]


def per_window(path, times_and_weights, wins):
    return [sum(w for t, w in times_and_weights if a <= t < b) for a, _, b in wins]


@pytest.fixture(scope="module", params=PROFILED)
def traced(request):
    path = sample(request.param)
    return path, analyse(open_trace(path)).main.summary.phases


def test_phase_times_match_sql(traced):
    path, phases = traced
    wins = windows(path)
    assert phases.marked
    for name, measured in (("cg-advise:optimizer", phases.optimizer_ms), ("cg-advise:backward", phases.backward_ms),
                           ("cg-advise:forward", phases.forward_ms)):
        ranges = [(s, e - s) for s, e, _ in sql(path, RANGES, name)]
        assert measured == pytest.approx(statistics.median(per_window(path, ranges, wins)) / 1e6, rel=1e-9), name


def test_time_between_iterations_leaves_out_syncs(traced):
    path, phases = traced
    wins = windows(path)
    syncs = sql(path, SYNCS)
    gaps = [following - end - sum(e - s for s, e in syncs if end <= s < following)
            for _, end, following in wins[:-1]]
    assert phases.between_iterations_ms == pytest.approx(statistics.median(max(g, 0) for g in gaps) / 1e6, rel=1e-9)


def test_syncs_between_iterations_and_the_host_time_before_the_first(traced):
    """Per iteration but the last: the syncs from its end to the next one's start, and where
    there is one, the time to the first (the momentum encoder's EMA update, then its pageable
    batch copies); the traces without any read 0 and None."""
    path, phases = traced
    wins = windows(path)
    syncs = sorted(s for s, _ in sql(path, SYNCS))
    counts = [sum(1 for s in syncs if end <= s < following) for _, end, following in wins[:-1]]
    before = [min(s for s in syncs if end <= s < following) - end
              for (_, end, following), n in zip(wins[:-1], counts) if n]
    assert phases.syncs_between == statistics.median(counts)
    if before:
        assert phases.before_sync_ms == pytest.approx(statistics.median(before) / 1e6, rel=1e-9)
    else:
        assert phases.before_sync_ms is None
    if "momentum" in str(path):
        assert phases.syncs_between == 2 and phases.before_sync_ms > 0.05


def test_after_backward_is_iteration_end_minus_last_backward_end(traced):
    path, phases = traced
    backward = sql(path, RANGES, "cg-advise:backward")
    after = [end - max(e for s, e, _ in backward if a <= e < b) for a, end, b in windows(path)]
    assert phases.after_backward_ms == pytest.approx(statistics.median(after) / 1e6, rel=1e-9)
    assert 0 < phases.after_backward_ms < phases.backward_ms + phases.optimizer_ms + 5


def test_syncs_after_the_backward_are_counted_per_iteration(traced):
    """The syncs from the last backward's end to the iteration's end, by SQL: the AMP loop's
    GradScaler reads its inf check there once a step, the GAN its generator output's mean;
    the plain loop has none, and the Hugging
    Face loop's one sync a step falls inside the model's forward."""
    path, phases = traced
    backward = sql(path, RANGES, "cg-advise:backward")
    syncs = sql(path, SYNCS)
    counts = []
    for a, end, b in windows(path):
        last = max(e for s, e, _ in backward if a <= e < b)
        counts.append(sum(last <= s < end for s, _ in syncs))
    assert phases.syncs_after_backward == statistics.median(counts)
    # the AMP loop's inf check; the GAN's read of the generator step's output (``D_G_z2``)
    assert phases.syncs_after_backward == (1 if "amp" in path.name or "gan" in path.name else 0)
    if "hf" in path.name:
        forward = sql(path, RANGES, "cg-advise:forward")
        inside = [sum(s <= t <= e for s, e, _ in forward) for t, _ in syncs]
        assert sum(inside) >= len(windows(path)) - 1   # one a step, under the forward range


def test_syncs_inside_the_forward_and_backward_are_counted_per_iteration(traced):
    """The syncs under a forward or backward range of their own thread, by SQL: the Hugging
    Face loop's one a step (its model reads a mask on the host); the AMP loop's is outside."""
    path, phases = traced
    calls = sql(path, RANGES, "cg-advise:forward") + sql(path, RANGES, "cg-advise:backward")
    syncs = sql(path, SYNCS_BY_THREAD)
    inside = [(t, 1) for t, tid in syncs if any(s <= t <= e and thread == tid for s, e, thread in calls)]
    assert phases.syncs_in_model == statistics.median(per_window(path, inside, windows(path)))
    assert phases.syncs_in_model == (1 if "hf" in path.name else 0)


def test_optimizer_operations_per_iteration(traced):
    path, phases = traced
    launches = [(t, 1) for (t,) in sql(path, optimizer_ops_sql(path))]
    counts = per_window(path, launches, windows(path))
    assert phases.optimizer_ops == statistics.median(counts) and phases.optimizer_ops > 0


def test_an_export_without_the_phase_ranges_is_marked_so():
    phases = analyse(open_trace(sample("launch_eager"))).main.summary.phases
    assert not phases.marked and phases.backward_ms == 0 and phases.optimizer_ops == 0


@pytest.mark.parametrize("name, calls", [("zoo_mlp_profiled", 1), ("corpus_micro_steps_profiled", 4)])
def test_forward_calls_per_iteration_match_sql(name, calls):
    """Top-level forward calls that start inside each iteration range (not after its end: an
    evaluation between iterations is not the step's), median over the iterations: one for a
    plain loop, four for tests/corpus/micro_steps.py's four micro-steps, each of which a
    graphed callable replays and pays for."""
    path = sample(name)
    forwards = [start for start, _, _ in sql(path, RANGES, "cg-advise:forward")]
    counted = [sum(a <= t < end for t in forwards) for a, end, _ in windows(path)]
    got = analyse(open_trace(path)).main.summary.phases.forward_calls
    assert got == pytest.approx(statistics.median(counted)) == calls


def test_a_gan_iteration_is_its_whole_loop_iteration():
    """DCGAN's loop steps the discriminator's optimizer, then the generator's: each iteration
    range of the profile holds both steps and the four top-level calls (the discriminator's
    three, the generator's one), by SQL over the ranges of the real export, so the eager time
    is the loop iteration's (tune timed 4.37 ms; the profile 4.47 ms, 1.93 ms when each step
    ended an iteration)."""
    path = sample("corpus_gan_profiled")
    wins = windows(path)
    optimizer = [s for s, _, _ in sql(path, RANGES, "cg-advise:optimizer")]
    forward = [s for s, _, _ in sql(path, RANGES, "cg-advise:forward")]
    assert len(wins) >= 10
    for start, end, _ in wins:
        assert sum(start <= t <= end for t in optimizer) == 2
        assert sum(start <= t <= end for t in forward) == 4
    phases = analyse(open_trace(path)).main.summary.phases
    assert phases.between_iterations_ms < phases.forward_ms


KERNEL_LAUNCHES = """
SELECT r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = k.correlationId AND (r.globalTid & -16777216) = k.globalPid
ORDER BY r.start
"""


def test_the_models_and_the_losss_kernels_per_iteration_match_sql(traced):
    """Kernels launched inside a top-level forward range of the launching thread, and those the
    forward's thread launches outside them from each iteration's first forward to its first
    backward (the loss, whose backward stays eager around graphed callables), by SQL over the
    runtime calls, medians over the iterations. The momentum encoder's loss (a normalised
    cosine between predictor and target, the target encoder's no-grad call unmarked) launches
    more kernels than its online forward; the MLP's cross-entropy a few."""
    path, phases = traced
    forward = sql(path, RANGES, "cg-advise:forward")
    backward = sql(path, RANGES, "cg-advise:backward")
    launches = sql(path, KERNEL_LAUNCHES)
    main = statistics.mode(tid for _, _, tid in forward)
    inside = [any(s <= t <= e and tid == ftid for s, e, ftid in forward) for t, tid in launches]
    model, loss = [], []
    for a, _, b in windows(path):
        model.append(sum(a <= t < b for (t, _), hit in zip(launches, inside) if hit))
        first_forward = min((s for s, _, _ in forward if a <= s < b), default=None)
        first_backward = min((s for s, _, _ in backward if a <= s < b), default=None)
        if first_forward is None or first_backward is None or first_forward >= first_backward:
            loss.append(0)
        else:
            loss.append(sum(first_forward <= t < first_backward and tid == main and not hit
                            for (t, tid), hit in zip(launches, inside)))
    assert phases.forward_ops == statistics.median(model) > 0
    assert phases.loss_ops == statistics.median(loss)
    if "momentum" in path.name:
        assert phases.loss_ops > phases.forward_ops
    if "mlp" in path.name:
        assert 0 < phases.loss_ops < 5


CHILDREN = """
SELECT DISTINCT s.value FROM NVTX_EVENTS n JOIN StringIds s ON s.id = n.textId WHERE s.value GLOB 'cg-advise:module:*'
"""


def test_children_called_more_often_than_the_model_match_sql():
    """A seq2seq decoder unrolled in Python: the host time per iteration of the top-level
    children called more often than the model itself (the submodule helper runs those
    eagerly), median over the iterations. The script calls the embedding 9 times a step, the
    decoder cell and the output layer 8, the encoder once."""
    path = sample("corpus_seq2seq_profiled")
    wins = windows(path)
    forwards = statistics.median(per_window(path, [(s, 1) for s, _, _ in sql(path, RANGES, "cg-advise:forward")], wins))
    repeated, time = set(), [0] * len(wins)
    for (name,) in sql(path, CHILDREN):
        ranges = [(s, e - s) for s, e, _ in sql(path, RANGES, name)]
        if statistics.median(per_window(path, [(s, 1) for s, _ in ranges], wins)) > forwards:
            repeated.add(name.rsplit(":", 1)[-1])
            time = [t + w for t, w in zip(time, per_window(path, ranges, wins))]
    assert repeated == {"embed", "decoder", "out"} and forwards == 1
    phases = analyse(open_trace(path)).main.summary.phases
    assert phases.submodules_repeated_ms == pytest.approx(statistics.median(time) / 1e6, rel=1e-9)
    assert 0 < phases.submodules_repeated_ms < phases.submodules_ms


BATCH_COPY_LAUNCHES = """
SELECT r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_MEMCPY c JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = c.correlationId AND (r.globalTid & -16777216) = c.globalPid
WHERE c.copyKind IN (1, 3)
"""


@pytest.mark.parametrize("name", ["corpus_fixmatch_profiled", "corpus_ddpm_profiled", "corpus_gan_profiled",
                                  "zoo_mlp_profiled"])
def test_the_batch_prepared_on_the_gpu_between_iterations_matches_sql(name):
    """From the first kernel the model's thread launches after the gap's last copy to the GPU
    to the next iteration's start, less the zero_grad calls and syncs starting in it, per gap,
    by SQL; 0 where the gap copies nothing to the GPU. FixMatch augments its batch after
    `.to(device)`: most of a millisecond of its host time between iterations; DDPM draws its
    noise on the GPU with no copy to it in the gap (its EMA update lies there too, and the two
    cannot be told apart; the loss it logs every 50 steps is a copy back, no mark): 0."""
    path = sample(name)
    phases = analyse(open_trace(path)).main.summary.phases
    main = statistics.mode(tid for _, _, tid in sql(path, RANGES, "cg-advise:forward"))
    kernels = sorted(t for t, tid in sql(path, KERNEL_LAUNCHES) if tid == main)
    tables = {t for (t,) in sql(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    copies = sorted(t for t, tid in (sql(path, BATCH_COPY_LAUNCHES) if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables else [])
                    if tid == main)
    left_out = [(s, e) for s, e, _ in sql(path, RANGES, "cg-advise:zero_grad")] + sql(path, SYNCS)
    prepared = []
    for _, end, following in windows(path)[:-1]:
        last = max((c for c in copies if end <= c < following), default=None)
        first = min((k for k in kernels if last is not None and last < k < following), default=None)
        if first is None:
            prepared.append(0)
            continue
        prepared.append(max(following - first - sum(e - s for s, e in left_out if first <= s < following), 0))
    assert phases.prepared_ms == pytest.approx(statistics.median(prepared) / 1e6, rel=1e-9)
    if "fixmatch" in name:
        assert 0.2 < phases.prepared_ms < phases.between_iterations_ms
    if "ddpm" in name:
        assert phases.prepared_ms == 0 < phases.between_iterations_ms
