"""The shipped benefit model on the committed unseen-script measurements (bench/unseen_eval.py):
a refit that does worse on scripts it never saw fails here, not in a user's hands."""
import json

import pytest
from conftest import bench_module


@pytest.fixture(scope="module")
def unseen():
    return bench_module("unseen_eval")


def test_every_committed_set_is_read_whole(unseen):
    """Each set's measurements are every paired process of every script it has a tune result for:
    counted here from the tune result files themselves (the scope's row, ok, one paired speedup
    per process), so a renamed file or a changed result layout cannot shrink the evaluation. Of
    the sets timed as tune times now, a short script's tune timed in the minimum's windows of 10
    steps is left out: its profile's untraced baseline spans under a second (its run record's
    ``host_ms``, summed here) and its graphed windows are more than tune's one pair."""
    from advisor import predict as pr

    model = pr.load_model()
    evaluated = {s["set"]: s for s in unseen.evaluate(model)}

    def short_windows(folder, row, tuned):
        for record in folder.rglob(f"{row['workload']}_eager.cg-advise-run.json"):
            untraced = json.loads(record.read_text()).get("untraced", {})
            if untraced.get("gpu_ms_per_iteration") == pytest.approx(float(row["baseline_ms"]), rel=1e-9):
                return (sum(untraced.get("host_ms") or []) < 1000 and len(tuned.get("window_ms") or []) != 1
                        and not (tuned.get("window_steps") or 0) > 10)
        return False

    left_out = 0
    for label, rows, results, scope, _ in unseen.SETS:
        expected = 0
        now = rows.startswith(unseen.NOW + unseen.NOW_H200)
        for row in pr.read_dataset(unseen.RESULTS / rows):
            folder = unseen.RESULTS / results
            path = next((p for p in (folder / f"{row['workload']}.py.cg-advise.json",
                                     folder / f"{row['workload']}.tune.json") if p.exists()), None)
            if path is None:
                continue
            tuned = next((r for r in json.loads(path.read_text())["rows"]
                          if r["scope"] == scope and r["status"] == "ok" and r.get("paired_speedup")), None)
            if tuned is not None and "speedup" in pr.predict(model, row).get(scope, {}):
                if now and short_windows((unseen.RESULTS / rows).parent, row, tuned):
                    left_out += 1
                    continue
                expected += len(tuned.get("paired_runs") or [tuned["paired_speedup"]])
        assert evaluated[label]["measurements"] == expected > 0, label
    assert left_out == 67   # short scripts' tunes of 2026-11-27/28, timed before one pair


def test_the_shipped_model_on_scripts_it_never_saw(unseen):
    """648 of the 811 paired measurements within the target and 677 inside the interval. The
    last 38: nineteen corpus loops of 200 steps profiled then tuned on a machine of one H200,
    one loop at a time with nothing beside it (2026-11-28, h200_single_gpu_2026-11-28), the model
    unchanged: full_iteration 5 of 19, fwd_bwd 15 of 19. Before them 628 of 773 and 654; the
    110 before: the loops too short for tune's long windows timed in one pair, the model
    unchanged (2026-11-28, h200_one_pair_2026-11-28): full_iteration 27 of 55, fwd_bwd 38 of 55;
    and left out of the sets timed as tune times now, 67 tunes of short scripts timed in windows
    of 10 steps before it (42 of them within the target). Before them 605 of
    730 and 630, with the
    full-iteration helper's cost the line's constant alone where patch hands it no input
    (advisor.predict.helper_inputs_share: 599 and 625 before it). The last 83, counted before it: 23 corpus loops profiled then tuned on a machine of four H200s, one loop a GPU at a time, 19
    of them on an H200 for the first time, the model unchanged (2026-11-28): full_iteration 20 of
    33, fwd_bwd 29 of 34; then sixteen loops (nine of those and seven of earlier H200 sets)
    profiled and tuned on the next machine start, full_iteration alone: 8 of 16. Before them 542
    of 647 and 566; the 43 before: twelve corpus loops never profiled before (some tuned or run
    whole once), profiled with the default baseline on H200s then tuned, the model unchanged (2026-11-28): full_iteration 16 of 20,
    fwd_bwd 23 of 23. Before them 503 of 604 and 526, the model refitted with the square-root host
    speed (advisor.predict._host_speed; 492 and 510 before it); the 20 before: ten of eleven loops profiled on an H200 with the default baseline and the
    capturable step measured, then tuned (2026-11-28). Before them 476 of 584 and 492; the 12 before: six loops with an Adam-family optimizer profiled on an H100 with the capturable step
    measured by the calibration, then tuned (2026-11-28). Before them 465 of 572 and 480; the 69
    before: 29 of the loops below (seven of them twice) profiled then tuned on four H200s (2026-11-28),
    each profile timing 3 s before its recording and 3 s after it. Before them 408 of 503 and 422, since the
    profile's untraced time is taken wherever it was measured (before: 409 and 431; the eager
    time had fallen back on the traced estimate where the untraced time read above the traced
    period). The last 34: sixteen of the loops below tuned again (one of them twice) one at a time on one-GPU
    machines. Before them 386 of 469 and 407 (twenty-five loops tuned with long windows on a machine of
    four H100s; before those fourteen loops tuned with paired windows lengthened past the
    minimum, each graphed one 50 ms: windows of 10 steps by turns read a graph 1.13-1.58x slower
    than a loop that replays throughout), each step of that history in docs/prediction-evidence.md and
    bench/results/paired_timing/*/README.md. The interval must hold about what it says: neither
    much narrower than now (898 of 1007 at least; 885 of 992 before the 15 tunes below, 868 of 964 before the 14 tunes below, 825 of 908 before the 28 loops below, 757 before
    tiny steps and short baselines got their wider interval) nor vacuous (over 95 %). The last 56:
    28 loops drawn at random from those the H200 sets had tuned full_iteration on, profiled with
    today's default (three bare processes) and tuned on a machine of two H200s (2026-11-29):
    full_iteration 21 of 28, fwd_bwd 19 of 28; 722 of 908 before them. The last 28: 12 of those
    loops again (14 tunes) with the calibration's graphed-callable figures recorded, on another
    machine of two H200s and a lone H200 (2026-11-29): full_iteration 6 of 14, fwd_bwd 12 of 14;
    762 of 964 before them. The unsteady interval refitted with them took the count inside from
    890 to 885 of 992. The last 15: ten loops of public shapes written on 2026-11-30, four of
    medium size, profiled with today's default and tuned on a machine of two H200s (two of them
    again after the fixes their first tunes found): full_iteration 4 of 7, fwd_bwd 8 of 8, all
    steady; 780 of 992 before them. The last 8: four loops written on 2026-11-30 once
    full_iteration copied back a batch changed in place and captured `running += train_step(...)`,
    on another pair: full_iteration 4 of 4, fwd_bwd 4 of 4 (3 inside the interval); 802 of 1018 and
    908 inside before them. The last 12: six Trainer classes whose loop calls self.train_step,
    profiled and tuned on another pair (2026-11-30, the session after): full_iteration 6 of 6,
    fwd_bwd 5 of 6, with the helper's cost counted per name it is handed
    (advisor.predict.helper_inputs_share), which took 810 to 812 of the 1026 before them. The
    last 10: five loops of a seeded draw from the H200's earlier loops, profiled with the default
    and tuned on a lone H200 (2026-12-01): full_iteration 2 of 5, fwd_bwd 5 of 5; 823 of 1038 and
    926 inside before them (the unsteady interval refitted with them). The last 3: one loop of a
    second draw tuned with tune's default of three processes for a scope timed in one pair (each
    process counted; patch refuses its fwd_bwd), the same day: full_iteration 3 of 3; 830 of 1048
    and 935 inside before them (the unsteady interval unchanged by it). The last 48: the next eight
    loops of that second draw, profiled with the default and tuned with tune's default on a lone
    H200 (2026-12-01, later), each of three processes a scope counted: full_iteration 13 of 24,
    fwd_bwd 20 of 24; 833 of 1051 before them (the unsteady interval refitted with them). The last
    48: eight more loops of that draw on the next day's lone H200 (2026-12-02), predicted by the
    model as it was: full_iteration 19 of 24, fwd_bwd 19 of 24; 866 of 1099 and 971 inside before
    them (the unsteady interval refitted with them after). The last 48: eight more loops of that
    draw on a lone H200 in a later session the same day, the model as it was: full_iteration 12 of
    24, fwd_bwd 13 of 24; 904 of 1147 and 1005 inside before them (1033 with them, 1031 once the
    unsteady interval was refitted with them). The last 48: eight more loops of that draw, tuned
    once fwd_bwd's eager windows ran the module's own forward instead of the patch's forward
    around it (tuner/harness.py _switch_patch_holder; lone H200, 2026-12-02), the model as it
    was: full_iteration 19 of 24, fwd_bwd 22 of 24; 929 of 1195 and 1031 inside before them (the
    unsteady interval unchanged by the refit)."""
    from advisor import predict as pr

    sets = unseen.evaluate(pr.load_model())
    hits, total = sum(s["hits"] for s in sets), sum(s["measurements"] for s in sets)
    inside, counted = sum(s["inside_interval"] for s in sets), sum(s["with_interval"] for s in sets)
    assert total == 1243
    assert hits >= 966
    compile_hits = sum(s["hits"] for s in sets if s["scope"] == "compile")
    compile_total = sum(s["measurements"] for s in sets if s["scope"] == "compile")
    assert compile_hits >= 0.75 * compile_total   # the issue's target for compile
    assert inside >= 1070 and inside / counted <= 0.95


def test_the_sets_timed_as_tune_times_now(unseen):
    """The loops tuned with long paired windows (tune's timing since 2026-11-27): the DCGAN's
    full_iteration, which missed on every set timed in windows of 10 steps (9.18x predicted for
    5.81x), 8.70x for 8.98x; full_iteration 12 of 14 within 20 %, fwd_bwd 13 of 13. With the 25
    loops tuned on four GPUs after them: full_iteration 28 of 39, fwd_bwd 34 of 38; with sixteen of
    those tuned again on one GPU (17 profiles and tunes): 38 of 56 and 47 of 55, and 43 and 50 once the profile's
    untraced time was taken wherever it was measured; with the six loops whose calibration
    measured the capturable step, 48 of 62 and 56 of 61 (57 with the square-root host speed).
    Since tune times a script too short for the long windows in one pair (tune.paired_settings),
    such scripts' tunes in windows of 10 steps are left out (``timed_as_now``): 45 of 52 and 49
    of 51."""
    from advisor import predict as pr

    sets = unseen.evaluate(pr.load_model())

    def by_scope(prefixes):
        mine = [s for s in sets if s["rows"].startswith(prefixes)]
        return {scope: [sum(s[k] for s in mine if s["scope"] == scope) for k in ("hits", "measurements")]
                for scope in ("full_iteration", "fwd_bwd")}

    first = by_scope((unseen.LONG,))
    assert first["full_iteration"][1] == 14 and first["full_iteration"][0] >= 12
    assert first["fwd_bwd"][1] == 13 and first["fwd_bwd"][0] >= 12
    now = by_scope(unseen.NOW)
    assert now["full_iteration"][1] == 52 and now["full_iteration"][0] >= 44
    assert now["fwd_bwd"][1] == 51 and now["fwd_bwd"][0] >= 48
    # the H200: 29 of those loops (36 profiles and tunes) on four H200s, the model unchanged:
    # 27 of 35 and 30 of 34; with eleven profiled with the default baseline and the capturable step
    # measured, then tuned, on one H200: 34 of 45 and 39 of 44; 42 of 44 with the square-root
    # host speed; with twelve loops never profiled before, profiled then tuned on H200s: 50 of 65
    # and 65 of 67; with 23 loops profiled then tuned on a machine of four H200s (19 of them on an
    # H200 for the first time, 2026-11-28): 70 of 98 and 94 of 101; with sixteen loops (nine of
    # those, seven of earlier sets) on the next machine start, full_iteration alone: 78 of 114;
    # 82 of 114 with the helper cost of a helper handed no input lowered; with the short
    # scripts' tunes in windows of 10 steps left out and twenty loops of 200 steps timed in one
    # pair read in stretches (tune as it is now): 77 of 107 and 94 of 101; with nineteen loops
    # of 200 steps profiled then tuned on a machine of one H200, one at a time: 82 of 126 and
    # 109 of 120; with ten loops of public examples' shapes written after the model, profiled
    # then tuned on a lone H200 (four of them again with the batch bound before the step, as
    # full_iteration's refusal says): 86 of 132 and 115 of 126; with four of those
    # loops again after the fixes that let tune and patch take them (an RNN's dropout, Adagrad, a
    # distribution's argument check): 88 of 136 and 118 of 130; with thirteen small-step loops
    # profiled once the calibration measured the step's edges (nine written after the model,
    # four corpus loops the H200 sets had under-predicted): 97 of 149 and 129 of 143; with 18
    # earlier corpus loops drawn at random and profiled again with today's calibration: 108 of
    # 167 and 144 of 161; with twelve corpus loops drawn at random and profiled with profile's
    # default of three bare processes: 113 of 173 and 152 of 170 (predicted from the profiled
    # process's own baseline instead, 4 and 6 where the bare processes' median hit 5 of 6 and 8 of 9);
    # with 28 loops drawn from the earlier H200 full_iteration loops, profiled with that default
    # and tuned on a machine of two H200s: 134 of 201 and 171 of 198 (21 of 28 and 19 of 28 there;
    # from the bootstrap's baseline 15 and 24: the bare processes win full_iteration, lose fwd_bwd);
    # with 14 of those loops again, the calibration's graphed-callable figures recorded, on another
    # pair and a lone H200: 140 of 215 and 183 of 212 (6 of 14 and 12 of 14 there; from the
    # bootstrap's baseline 6 and 13); with ten loops of public shapes written on 2026-11-30, four of
    # medium size, on another pair: 144 of 222 and 191 of 220 (4 of 7 and 8 of 8 there); with six
    # loops whose step is a function they call (the next session), on another pair: 148 of 227 and
    # 197 of 226 (4 of 5 and 6 of 6 there); with two loops that change their batch in place and
    # two new shapes (the same day): 152 of 231 and 201 of 230 (4 of 4 and 4 of 4 there); with the
    # helper's cost counted per name it is handed: 154 of 231; with six Trainer classes (the session
    # after), on another pair: 160 of 237 and 206 of 236 (6 of 6 and 5 of 6 there); with five loops
    # of a seeded draw from the earlier ones, profiled with the default and tuned in one process a
    # candidate on a lone H200 (2026-12-01): 162 of 242 and 211 of 241 (2 of 5 and 5 of 5 there);
    # with one loop of a second draw tuned in tune's default of three processes: 165 of 245; with
    # the next eight loops of that draw, each scope in three processes: 178 of 269 and 231 of 265
    # (13 of 24 and 20 of 24 there; from the bootstrap's baseline 8 and 21); with eight more of
    # that draw the next day (2026-12-02): 197 of 293 and 250 of 289 (19 of 24 and 19 of 24 there;
    # from the bootstrap's baseline 16 and 19); with eight more of that draw in a later session the
    # same day: 209 of 317 and 263 of 313 (12 of 24 and 13 of 24 there; from the bootstrap's
    # baseline 15 and 15)
    h200 = by_scope(unseen.NOW_H200)
    assert h200["full_iteration"][1] == 341 and h200["full_iteration"][0] >= 223
    assert h200["fwd_bwd"][1] == 337 and h200["fwd_bwd"][0] >= 280
    assert by_scope((unseen.THREE,))["full_iteration"] == [3, 3]
    second = by_scope((unseen.SECOND_DRAW,))
    assert second["full_iteration"] == [13, 24] and second["fwd_bwd"] == [20, 24]
    next_day = by_scope((unseen.SECOND_DRAW_MORE,))
    assert next_day["full_iteration"] == [19, 24] and next_day["fwd_bwd"] == [19, 24]
    third = by_scope((unseen.SECOND_DRAW_THIRD,))
    assert third["full_iteration"] == [12, 24] and third["fwd_bwd"] == [13, 24]
    # eight more of the draw, fwd_bwd's eager windows through the module's own forward (2026-12-02)
    own_forward = by_scope((unseen.OWN_FORWARD,))
    assert own_forward["full_iteration"] == [19, 24] and own_forward["fwd_bwd"] == [22, 24]
    drawn = by_scope((unseen.DRAWN,))
    assert drawn["full_iteration"] == [2, 5] and drawn["fwd_bwd"] == [5, 5]
    trainers = by_scope((unseen.TRAINERS,))
    assert trainers["full_iteration"] == [6, 6] and trainers["fwd_bwd"] == [5, 6]
    shapes = by_scope((unseen.NEW_SHAPES,))
    assert shapes["full_iteration"] == [4, 7] and shapes["fwd_bwd"] == [8, 8]
    steps = by_scope((unseen.STEP_FUNCTIONS,))
    assert steps["full_iteration"] == [4, 5] and steps["fwd_bwd"] == [6, 6]
    pair = by_scope((unseen.X2,))
    assert pair["full_iteration"] == [22, 28] and pair["fwd_bwd"] == [19, 28]
    callable_ = by_scope((unseen.CALLABLE,))
    assert callable_["full_iteration"] == [6, 14] and callable_["fwd_bwd"] == [12, 14]
    recalibrated = by_scope((unseen.RECALIBRATED,))
    assert recalibrated["full_iteration"] == [10, 18] and recalibrated["fwd_bwd"] == [15, 18]
    bare = by_scope((unseen.BARE,))
    assert bare["full_iteration"] == [5, 6] and bare["fwd_bwd"] == [8, 9]
    model = pr.load_model()
    assert unseen.bare_against_bootstrap(model, "full_iteration") == (119, 107, 174)   # every bare set
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.OWN_FORWARD,)) == (19, 17, 24)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.OWN_FORWARD,)) == (22, 23, 24)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.SECOND_DRAW_THIRD,)) == (12, 15, 24)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.SECOND_DRAW_THIRD,)) == (13, 15, 24)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.SECOND_DRAW_MORE,)) == (19, 16, 24)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.SECOND_DRAW_MORE,)) == (19, 19, 24)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.SECOND_DRAW,)) == (13, 8, 24)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.SECOND_DRAW,)) == (20, 21, 24)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.THREE,)) == (3, 3, 3)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd") == (141, 146, 176)
    # the seeded draw of 2026-12-01: from the bootstrap's baseline 3 of 5 and 5 of 5
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.DRAWN,)) == (2, 3, 5)
    # the Trainer classes: from the bootstrap's baseline 5 of 6 and 4 of 6
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.TRAINERS,)) == (6, 5, 6)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.TRAINERS,)) == (5, 4, 6)
    # the step functions (2026-11-30, the next session): from the bootstrap's baseline 2 of 5 and 5 of 6
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.STEP_FUNCTIONS,)) == (4, 2, 5)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.STEP_FUNCTIONS,)) == (6, 5, 6)
    # the ten new shapes (medium and small steps, 2026-11-30): from the bootstrap's baseline 6 of 7 and 7 of 8
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.NEW_SHAPES,)) == (4, 6, 7)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.NEW_SHAPES,)) == (8, 7, 8)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.CALLABLE,)) == (6, 8, 14)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.CALLABLE,)) == (12, 13, 14)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.BARE,)) == (5, 4, 6)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.BARE,)) == (8, 6, 9)
    assert unseen.bare_against_bootstrap(model, "full_iteration", (unseen.X2,)) == (22, 16, 28)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.X2,)) == (19, 24, 28)
    assert unseen.bare_against_bootstrap(model, "fwd_bwd", (unseen.EDGES,)) == (0, 0, 0)   # no bare processes there
    edges = by_scope((unseen.EDGES,))
    assert edges["full_iteration"] == [9, 13] and edges["fwd_bwd"] == [11, 13]
    default = by_scope((unseen.H200_DEFAULT,))
    assert default["full_iteration"] == [8, 10] and default["fwd_bwd"] == [9, 10]
    never = by_scope((unseen.H200_NEVER,))
    assert never["full_iteration"] == [16, 20] and never["fwd_bwd"] == [22, 22]
    more = by_scope((unseen.H200_MORE,))
    assert more["full_iteration"] == [15, 22] and more["fwd_bwd"] == [15, 15]
    one_pair = by_scope((f"{unseen.ONE_PAIR}/third",))
    assert one_pair["full_iteration"] == [10, 20] and one_pair["fwd_bwd"] == [15, 20]
    single = by_scope((unseen.SINGLE,))
    assert single["full_iteration"] == [6, 19] and single["fwd_bwd"] == [15, 19]
    written = by_scope((f"{unseen.NEW_LOOPS}/as_written",))
    assert written["full_iteration"] == [2, 3] and written["fwd_bwd"] == [2, 2]
    bound = by_scope((f"{unseen.NEW_LOOPS}/batch_bound",))
    assert bound["full_iteration"] == [3, 3] and bound["fwd_bwd"] == [4, 4]
    fixed = by_scope((f"{unseen.NEW_LOOPS}/after_fixes",))
    assert fixed["full_iteration"] == [2, 4] and fixed["fwd_bwd"] == [3, 4]


def test_the_short_loops_of_the_last_set_were_timed_in_one_pair(unseen):
    """Every graph scope of the set timed as tune times a short script now (CG_STEPS=200, the
    fixed 200-step loops) ran one graphed window, of half its steps past the warm-up less the
    margin, read as the median of its stretches: the tune files say so (one graphed window,
    ``window_steps``, the steps its process counted), and tune.paired_settings gives that
    window for the steps the eager run counted, which the tune file does not keep: the
    process's own count, or up to two more (the word language model's graph scopes counted 198
    and 199 of its 200)."""
    from tuner.harness import Settings
    from tuner.tune import paired_settings

    files = sorted((unseen.RESULTS / unseen.ONE_PAIR / "third").glob("*.tune.json"))
    rows = [row for path in files for row in json.loads(path.read_text())["rows"] if row["status"] == "ok"]
    assert len(files) == 20 and len(rows) == 40
    for row in rows:
        fitted = [paired_settings(Settings(), row["steps"] + more) for more in range(3)]
        assert len(row["window_ms"]) == 1 and all(s.repeats == 1 for s in fitted), row
        assert row["window_steps"] in {s.iterations // 2 for s in fitted} and row["window_steps"] >= 89, row


def test_full_iteration_misses_where_the_step_is_tiny_or_the_baseline_short(unseen):
    """By what the profile saw, over the sets timed as tune times now (both GPUs): a graphed
    step predicted at 0.1 ms or more with a baseline timed over 1 s or more is within 20 % for
    106 of 128 tunes (104 of 124 before four of the loops written after the model were tuned after this stop's fixes, 100 of 118 before those ten loops); a tinier step or a shorter baseline for 27 of 60 (22 of 41 before the
    nineteen loops tuned on a lone H200; 31 of 58 with the short scripts' tunes in windows of 10
    steps, which read a graph slow; the short scripts timed in one pair since). Every
    full_iteration tune of those sets is in one or the other. A miss is mostly a measurement
    above the prediction: 17 above and 5 below, 29 above and 4 below; of the tunes whose graphed
    step is predicted under 0.1 ms, those the report's caveat is printed beside
    (advisor.predict.TINY_STEP_NOTE), 18 of 43 within 20 %, 21 above and 4 below. With thirteen
    small-step loops profiled once the calibration measured the step's edges: 109 of 132
    (17 above, 6 below) and 33 of 69 (30 above, 6 below); tiny steps 22 of 50 (22 above, 6
    below): the old profiles, without the edges, still under-predict; the new ones miss both
    ways, on the eager side. With 18 earlier loops profiled again with the edges: 117 of 144
    (18 above, 9 below) and 36 of 75 (31 above, 8 below); tiny steps 24 of 53 (22 above, 7
    below). The profiles with the edges miss both ways, so the misses lean less above than
    they did (21 to 4 of tiny steps, 17 to 6 of steady ones before them): the bounds below say
    only that they still lean above, as the caveat says. With 28 loops profiled with three bare
    processes on a machine of two H200s: 136 of 168 (21 above, 11 below) and 43 of 85 (32 above,
    10 below); tiny steps 31 of 63 (23 above, 9 below). With 14 of those loops again on another
    pair and a lone H200: 138 of 172 (22 above, 12 below) and 47 of 95 (36 above, 12 below); tiny
    steps 35 of 73 (27 above, 11 below). With ten loops of public shapes on another pair (all
    steady): 142 of 179 (24 above, 13 below). With the helper's cost counted per name it is handed
    and six Trainer classes (all steady): 154 of 193 (26 above, 13 below) and 51 of 96 (32 above,
    13 below); tiny steps 39 of 74 (24 above, 11 below): fewer tiny steps under-predicted. With
    five loops of a seeded draw on a lone H200 (2026-12-01): 156 of 196 (27 above, 13 below) and
    51 of 98 (32 above, 15 below); tiny steps 39 of 76 (24 above, 13 below). With one loop tuned
    in three processes (steady): 159 of 199 (27 above, 13 below). With the next eight loops of
    that draw, three processes a scope each counted (2026-12-01, later): 169 of 217 (33 above, 15
    below) and 54 of 104 (32 above, 18 below); tiny steps 42 of 82 (24 above, 16 below): the
    tiny steps' misses lean above less than they did (by half again, no longer twice). With eight
    more of that draw the next day: 184 of 235 (35 above, 16 below) and 58 of 110 (34 above, 18
    below); tiny steps 46 of 88 (26 above, 16 below). With eight more in a later session the same
    day: 192 of 250 (40 above, 18 below) and 62 of 119 (36 above, 21 below); tiny steps 50 of 97
    (28 above, 19 below): the steady share fell under 77 % (to 76.8 %)."""
    from advisor import predict as pr

    regimes = unseen.by_regime(pr.load_model())
    (steady, counted, above, below), (rest, others, tiny_above, tiny_below) = regimes["steady"], regimes["tiny or short"]
    sets = [s for s in unseen.evaluate(pr.load_model())
            if s["scope"] == "full_iteration" and s["rows"].startswith(unseen.NOW + unseen.NOW_H200)]
    assert counted + others == sum(s["measurements"] for s in sets) == 393
    assert steady + rest == sum(s["hits"] for s in sets)
    assert steady + above + below == counted and rest + tiny_above + tiny_below == others
    assert (counted, others) == (268, 125) and steady >= 202 and steady / counted > 0.75 > 0.6 > rest / others
    # lean above: tiny steps 36 above against 12 below (32 against 10 before the 14 tunes of 2026-11-29
    # with the callable figures), steady 22 against 12; 32 against 13 with the helper's cost per name;
    # 32 against 18 with the second draw's eight loops in three processes
    assert tiny_above > 1.5 * tiny_below and above > 1.5 * below
    hits, tiny, step_above, step_below = regimes["tiny step"]
    # what the caveat says (24 above against 11 below before the seeded draw of 2026-12-01, 13 below
    # since, 16 below with the second draw's eight loops, 19 with its third part)
    assert (hits, tiny) == (54, 103) and step_above > 1.2 * step_below
    assert tiny < others and hits <= rest


def test_per_workload_the_median_of_a_loops_tunes_against_its_median_prediction(unseen):
    """The issue states its target per workload: each loop's median prediction against the
    median of its tunes' paired speedups. On the sets timed as tune times now: H100
    full_iteration 34 of 39 loops, fwd_bwd 36 of 38; H200 50 of 61 and 59 of 62 (35 of 42 and 41
    of 43 before the 23 loops profiled then tuned on a machine of four H200s on 2026-11-28, and
    the sixteen of the next machine start, full_iteration alone: 18 of 26 and 19 of 20, 12 of 19
    without the sixteen; 26 of 32 and 29 of 31 before the twelve loops never profiled before, 9 of
    10 and 12 of 12). With the short scripts' tunes in windows of 10 steps left out and twenty
    loops of 200 steps timed in one pair: H100 30 of 32 and 31 of 31, H200 48 of 62 and 56 of 62;
    with nineteen of those loops profiled then tuned again on a lone H200, H200 45 of 62 and 56;
    with the ten loops written after the model (a lone H200), 49 of 68 and 62 of 68; with four of
    them tuned after this stop's fixes, 51 of 72 and 64 of 71; with thirteen small-step loops
    profiled once the calibration measured the step's edges, 58 of 81 and 71 of 80; with 18
    of the loops profiled again with today's calibration, 56 of 81 and 71 of 80; with a
    seeded sample profiled with three bare processes, 57 of 82 and 74 of 84; with 28 of the
    loops profiled with them and tuned on a machine of two H200s, 58 of 82 and 72 of 84; with ten
    loops of public shapes written on 2026-11-30, 61 of 89 and 81 of 92; with the helper's cost
    counted per name it is handed and six Trainer classes (the session after), 77 of 104 and 95 of 107;
    with five loops of a seeded draw tuned again on a lone H200 (2026-12-01), 78 of 104 and 95 of 107;
    with eight loops of a second draw tuned in three processes a scope (later that day), 78 of 104
    and 98 of 107 (4 of 8 and 7 of 8 of those loops); with eight more the next day, 79 of 104 and
    97 of 107 (6 of 8 and 7 of 8 of those loops); with eight more in a later session the same day,
    79 of 104 and 97 of 107 (5 of 8 and 4 of 8 of those loops, each tuned before).
    Recounted here from each loop's tune files read as plain JSON (the paired
    speedup over graphing's slowdown of the eager windows, tuner.search.GRAPHED_EAGER_SLOWDOWN)."""
    import json
    import statistics

    from advisor import predict as pr
    from tuner.search import eager_slowdown

    sets = unseen.evaluate(pr.load_model())
    found = {(gpu, scope): unseen.per_workload(sets, prefixes, scope)
             for gpu, prefixes in (("H100", unseen.NOW), ("H200", unseen.NOW_H200)) for scope in unseen.GRAPH_PAIR}
    assert [n for _, n in found.values()] == [32, 31, 104, 107]
    assert found["H100", "full_iteration"][0] >= 29 and found["H100", "fwd_bwd"][0] >= 30
    assert found["H200", "full_iteration"][0] >= 55 and found["H200", "fwd_bwd"][0] >= 70
    assert unseen.per_workload(sets, (unseen.H200_NEVER,), "full_iteration") == (9, 10)
    assert unseen.per_workload(sets, (unseen.H200_MORE,), "full_iteration") == (12, 16)
    assert unseen.per_workload(sets, (unseen.H200_MORE,), "fwd_bwd") == (10, 10)
    assert unseen.per_workload(sets, (f"{unseen.ONE_PAIR}/third",), "full_iteration") == (10, 20)
    assert [unseen.per_workload(sets, (unseen.SECOND_DRAW,), scope) for scope in unseen.GRAPH_PAIR] == [(4, 8), (7, 8)]
    assert [unseen.per_workload(sets, (unseen.SECOND_DRAW_MORE,), scope) for scope in unseen.GRAPH_PAIR] == [(6, 8), (7, 8)]
    assert [unseen.per_workload(sets, (unseen.SECOND_DRAW_THIRD,), scope) for scope in unseen.GRAPH_PAIR] == [(5, 8), (4, 8)]
    # one loop tuned on several machine starts, its measurements read from the files themselves
    from paired_vs_predicted import tune_result

    measured = []
    for _, rows, results, scope, _ in unseen.SETS:
        if scope == "full_iteration" and rows.startswith(unseen.NOW_H200):
            path = tune_result(unseen.RESULTS / results, "tabular_bce")
            if path is not None:
                row = next(r for r in json.loads(path.read_text())["rows"] if r["scope"] == scope)
                # each process's paired speedup (a tune in three processes keeps them apart)
                measured += [r / eager_slowdown(scope) for r in row.get("paired_runs") or [row["paired_speedup"]]]
    assert len(measured) >= 2
    scripts = [p for s in sets if s["scope"] == "full_iteration" and s["rows"].startswith(unseen.NOW_H200)
               for name, _, paired in s["scripts"] if name == "tabular_bce" for p in paired]
    assert statistics.median(scripts) == pytest.approx(statistics.median(measured))


def test_median_hits_judges_a_loop_by_its_medians_not_by_each_tune(unseen):
    """Three profiles of one loop predicted 1, 1 and 3x, its tunes measured 1, 1.1 and 5x: one
    tune in three is missed per tune, none per loop (median 1 against 1.1); a second loop whose
    median measurement is off misses; a loop without a measurement is not counted."""
    scripts = [("a", 1.0, [1.0]), ("a", 1.0, [1.1]), ("a", 3.0, [5.0]),
               ("b", 2.0, [3.0, 3.2]), ("c", 4.0, [])]
    assert unseen.median_hits(scripts, 0.2) == (1, 2)
    assert unseen.median_hits(scripts[:3], 0.2) == (1, 1)
    assert unseen.median_hits([("b", 2.0, [3.0, 3.2])], 0.6) == (1, 1)   # the tolerance is the caller's


def test_the_step_edges_are_what_brings_the_small_step_misses_in():
    """bench/paired_vs_predicted.py on the four corpus loops whose small steps every H200 set had
    under-predicted, profiled again once the calibration measured the step's edges: within
    20 % for 3 of 4 as profiled, 0 of 4 predicted as if the profiles had not recorded the
    figure (``--without step_edges_us``); the measurements are the same."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    folder = root / "bench" / "results" / "paired_timing" / "h200_step_edges_2026-11-29" / "third"

    def hits(*extra):
        out = subprocess.run([sys.executable, str(root / "bench" / "paired_vs_predicted.py"), str(folder / "unseen_rows.csv"),
                              str(folder), "--scope", "full_iteration", *extra], capture_output=True, text=True, check=True)
        return next(line for line in out.stdout.splitlines() if ", paired: the prediction within" in line)

    assert hits().endswith("for 3 of 4 (75%)")
    assert hits("--without", "step_edges_us").endswith("for 0 of 4 (0%)")


def test_tunes_agree_judges_each_tune_by_the_median_of_its_loop_s_other_tunes(unseen):
    """Loop a tuned 10, 11 and 15x: 10 against the others' median 13 (1.3x) misses, 11 against
    12.5 (1.14x) hits, 15 against 10.5 (0.7x) misses; loop b tuned 4 and 4.5x: both hit; loop c,
    tuned once, is not counted."""
    scripts = [("a", 9.0, [10.0]), ("a", 9.0, [11.0, 15.0]), ("b", 4.0, [4.0]), ("b", 4.0, [4.5]),
               ("c", 2.0, [2.0])]
    assert unseen.tunes_agree(scripts, 0.2) == (3, 5, 2)


def test_the_measurement_s_own_repeatability_is_below_the_issue_s_target_for_full_iteration(unseen):
    """Each tune of a loop tuned more than once against the median of its other tunes, on the
    sets timed as tune times now: H100 full_iteration 30 of 37 (81 %, 17 loops), fwd_bwd 37 of
    37; H200 147 of 177 (83 %, 58 loops), fwd_bwd 157 of 172 (91 %); 112 of 139 and 128 of 134
    (48 loops) before the 28 loops tuned again on a machine of two H200s; with 14 of them tuned
    again on another pair and a lone H200, 156 of 191 (82 %) and 174 of 186; with five loops of a
    seeded draw on a lone H200, 160 of 198 and 183 of 195; with a loop of a second draw tuned in
    three processes, 163 of 202 (61 loops); with eight more loops of that draw, three processes a
    scope, 183 of 229 and 210 of 222 (64 loops); with eight more the next day, 204 of 255 and 235
    of 248 (66 loops); with eight more in a later session, 221 of 284 (78 %) and 261 of 277 (71
    loops). By the pairs tune timed (H200), a
    tune timed in one pair (a script too short for long pairs) repeats the same loop's other
    such tunes within 20 % for 139 of 191 full_iteration tunes and 172 of 190 fwd_bwd ones (122 of
    162 and 145 of 161 before the second draw's third part, 78 of 107 and 89 of 106 before its
    three-process tunes), one
    timed in several long pairs for 59 of 63 and 56 of 56: why tune now times a scope in one pair
    in three processes (tuner.runner.ONE_PAIR_RUNS). The tunes of a loop ran on
    different machine starts or hours; a prediction that knew only the loop's other tunes would
    reach no more: one full_iteration tune of these small launch-bound loops does not repeat
    another within 20 % as often as the issue's 90 %."""
    from advisor import predict as pr

    sets = unseen.evaluate(pr.load_model())
    assert unseen.repeatability(sets, unseen.NOW, "full_iteration") == (30, 37, 17)
    assert unseen.repeatability(sets, unseen.NOW, "fwd_bwd") == (37, 37, 17)
    assert unseen.repeatability(sets, unseen.NOW_H200, "full_iteration") == (244, 311, 74)
    assert unseen.repeatability(sets, unseen.NOW_H200, "fwd_bwd") == (280, 304, 74)
    pairing = {scope: unseen.by_pairing(pr.load_model(), scope) for scope in ("full_iteration", "fwd_bwd")}
    assert pairing["full_iteration"] == {"one pair": [161, 254, 162, 219], "several pairs": [67, 87, 59, 63]}
    assert pairing["fwd_bwd"] == {"one pair": [206, 256, 191, 218], "several pairs": [79, 81, 56, 56]}


def test_within_tune_judges_each_process_by_its_own_tune_s_other_processes(unseen):
    """A tune of processes 10, 11 and 15x: 10 against 13 misses, 11 against 12.5 hits, 15 against
    10.5 misses; a tune of one process is not counted, nor a set of another scope or prefix."""
    sets = [{"scope": "fwd_bwd", "rows": "x/unseen_rows.csv", "scripts": [("a", 9.0, [10.0, 11.0, 15.0]),
                                                                           ("b", 4.0, [4.0])]},
            {"scope": "full_iteration", "rows": "x/unseen_rows.csv", "scripts": [("a", 9.0, [1.0, 9.0])]},
            {"scope": "fwd_bwd", "rows": "y/unseen_rows.csv", "scripts": [("a", 9.0, [1.0, 9.0])]}]
    assert unseen.within_tune(sets, ("x",), "fwd_bwd") == (1, 3, 1)


def test_on_today_s_profile_the_prediction_hits_about_as_often_as_another_tune(unseen):
    """On the sets profiled with profile's default of today (three bare processes, the
    calibration's step edges; all on the H200): full_iteration within 20 % of 100 of 150 tunes
    (67 %) and of 48 of 68 loops' medians, where one tune of a loop repeats the median of its
    other tunes for 83 of 116 (72 %), and one process of a tune the median of the same tune's
    other processes for 56 of 75 (75 %, 15 of 24 in the second draw's third part): a
    full_iteration prediction hits nearly as often as the measurement repeats itself, and the
    issue's 90 % is above both. fwd_bwd 119 of 152, 64 of 72 loops, against 105 of 114 and 67
    of 72."""
    from advisor import predict as pr

    sets = unseen.evaluate(pr.load_model())
    assert unseen.todays_default(sets, "full_iteration") == (119, 174, 49, 70, 107, 144)
    assert unseen.todays_default(sets, "fwd_bwd") == (141, 176, 66, 74, 125, 142)
    assert unseen.within_tune(sets, unseen.NOW_H200, "full_iteration") == (79, 99, 33)
    assert unseen.within_tune(sets, unseen.NOW_H200, "fwd_bwd") == (87, 96, 32)
    assert unseen.within_tune(sets, (unseen.SECOND_DRAW_THIRD,), "full_iteration") == (15, 24, 8)
    assert unseen.within_tune(sets, (unseen.OWN_FORWARD,), "full_iteration") == (23, 24, 8)


def test_two_candidates_of_one_tune_read_the_eager_loop_apart(unseen):
    """Tune times each candidate in a process of its own, paired with the eager loop; the
    full_iteration and fwd_bwd candidates of one tune time the same eager loop a minute or so
    apart on the same machine. Over the tunes timed as tune times now, the longer of their two
    eager times is within 20 % of the shorter for 39 of 50 tunes on the H100 (78 %) and 151 of
    203 on the H200 (74 %): the loop's eager time, measured twice with nothing predicted, moves
    by more than the issue's 20 % in about one tune of four. On the H100 the misses go both ways
    (fwd_bwd's the longer in 6 of 11); on the H200 one way (45 of 52): the later candidate's
    eager windows read slower there, host drift over the tune or graphing's slowdown of the
    eager windows larger under fwd_bwd than the 1.07 both scopes are charged. With ten loops of
    public shapes on another pair (2026-11-30): 155 of 208 (46 of 53). With six Trainer classes on
    another pair (the session after): 164 of 222 (50 of 58); 2 of those 6 tunes agree. With five
    loops of a seeded draw on a lone H200 (2026-12-01): 167 of 227 (52 of 60); 3 of those 5. With
    eight loops of a second draw, three processes a scope (later that day): 174 of 235 (53 of 61);
    7 of those 8; with eight more the next day, 181 of 243 (54 of 62), 7 of those 8; with eight more
    in a later session, 186 of 251 (57 of 65), 5 of those 8."""
    assert unseen.eager_between_candidates(unseen.NOW) == (39, 50, 6)
    assert unseen.eager_between_candidates(unseen.NOW_H200) == (192, 259, 58)
    assert unseen.eager_between_candidates((unseen.OWN_FORWARD,)) == (6, 8, 1)
    assert unseen.eager_between_candidates((unseen.SECOND_DRAW_THIRD,)) == (5, 8, 3)
    assert unseen.eager_between_candidates((unseen.SECOND_DRAW_MORE,)) == (7, 8, 1)
    assert unseen.eager_between_candidates((unseen.SECOND_DRAW,)) == (7, 8, 1)
    assert unseen.eager_between_candidates((unseen.DRAWN,)) == (3, 5, 2)
    assert unseen.eager_between_candidates((unseen.TRAINERS,)) == (2, 6, 3)
    assert unseen.eager_between_candidates((unseen.CALLABLE,)) == (8, 14, 5)
    assert unseen.eager_between_candidates(unseen.NOW_H200, tolerance=10.0) == (259, 259, 0)   # every pair counted


def test_fwd_bwd_s_eager_windows_read_slower_than_full_iteration_s_on_the_h200(unseen):
    """Against the eager process tune times on its own: on the H100 both candidates' paired eager
    windows read a median 1.11x it, on the H200 full_iteration's 1.06x and fwd_bwd's 1.14x. Tune
    charges graphing's slowdown of the eager windows as 1.07 for both scopes (probed on MLPs), so
    on the H200 a fwd_bwd speedup carries about 7 % more eager time than a full_iteration one:
    the one-sidedness of the candidates' disagreement there, and of the H200's fwd_bwd misses
    (26 of 29 measured above the prediction). With ten loops of public shapes on another pair
    (2026-11-30): 1.061x and 1.147x, and no fwd_bwd miss among them. With eight loops of a second
    draw tuned in three processes a scope (2026-12-01): 1.062x and 1.148x, 30 of 34 misses above;
    with eight more the next day, the same, 34 of 39; with eight more in a later session, 1.063x
    and 1.150x, 42 of 50. The slowdown is no one factor: by tune's own eager step, fwd_bwd's
    windows read 1.25x under 1.2 ms and 1.09x at 4 ms or more (full_iteration's 1.14x and 1.02x),
    a cost per step more than a share of it (``eager_windows_by_size``). Most of it was the
    patch's forward around the graphed module, whose checks of each call ran in the eager windows
    too: with the eager windows through the module's own forward (OWN_FORWARD, eight loops),
    fwd_bwd's read 1.09x, as full_iteration's do, and every fwd_bwd loop of the set hit
    (``before_own_forward``)."""
    from advisor import predict as pr

    h100, h200 = unseen.eager_windows_over_eager_run(unseen.NOW), unseen.eager_windows_over_eager_run(unseen.NOW_H200)
    assert h100 == pytest.approx([1.109, 1.112], abs=0.002)
    assert h200 == pytest.approx([1.063, 1.148], abs=0.002)
    assert h200[1] / h200[0] > 1.05 > h100[1] / h100[0]
    own_forward = unseen.eager_windows_over_eager_run((unseen.OWN_FORWARD,))
    assert own_forward == pytest.approx([1.090, 1.087], abs=0.002) and own_forward[1] < h200[1] - 0.05
    sizes = {name: (tunes, fi, fb) for name, tunes, fi, fb in unseen.eager_windows_by_size(unseen.NOW_H200)}
    assert [tunes for tunes, _, _ in sizes.values()] == [73, 77, 76, 33]
    assert sizes["under 1.2 ms"][2] == pytest.approx(1.251, abs=0.002)
    assert sizes["4 ms or more"][2] == pytest.approx(1.098, abs=0.002)
    assert sizes["under 1.2 ms"][1] > 1.1 > 1.07 > 1.03 > sizes["4 ms or more"][1]   # the charged 1.07 fits neither end
    # the H200's fwd_bwd misses, steady and not: 26 of 29 measured above the prediction
    regimes = unseen.by_regime(pr.load_model(), "fwd_bwd", unseen.NOW_H200)
    hits, total, above, below = (sum(r[k] for r in (regimes["steady"], regimes["tiny or short"])) for k in range(4))
    assert (hits, total, above, below) == (285, 337, 43, 9)


def test_fwd_bwd_timed_through_the_modules_own_forward_against_the_same_loops_before(unseen):
    """The eight loops tuned since the eager windows run the module's own forward: fwd_bwd 22 of
    24 processes and 8 of 8 loops within 20 % of the prediction; the same loops' earlier H200
    tunes, timed with the patch's checks in the eager windows, 15 of 19 and 6 of 8, their tiny
    steps read faster than predicted (loss_history 1.30x against 0.95x, now 1.09x). Their
    full_iteration, which the change leaves alone, moves as the measurement does: 19 of 24 now,
    15 of 19 before."""
    from advisor import predict as pr

    sets = unseen.evaluate(pr.load_model())
    assert unseen.before_own_forward(sets, "fwd_bwd") == ((22, 24, 8, 8), (15, 19, 6, 8))
    assert unseen.before_own_forward(sets, "full_iteration") == ((19, 24, 7, 8), (15, 19, 8, 8))


def test_a_tiny_step_or_a_short_baseline_gets_the_wider_interval_of_such_loops(unseen):
    """The dataset's cross-validated errors (steady runs) make an interval that held 141 of 150
    steady full_iteration measurements over the sets timed as tune times now, but 50 of 75 of
    tiny steps or short baselines (fwd_bwd 150 of 167 and 37 of 54; a short baseline is the
    bootstrap's, not bare processes'). The shipped model's log_interval_unsteady is the order
    statistics of those loops' own errors (recomputed here by hand from unsteady_residuals);
    with it the printed interval holds 66 of 75 and 50 of 54, and about as much with each loop
    left out of its fit (66 and 49): what a new loop can expect. With the 28 loops profiled with
    three bare processes on a machine of two H200s (refitted): steady 157 of 168 and 166 of 195,
    the others 59 of 85 without the wider interval, 74 with it, 74 with each loop left out; with
    14 of those loops again on another pair and a lone H200 (refitted): steady 160 of 172 and 175
    of 209, the others 64 of 95 without it, 80 with it, 81 with each loop left out; with ten
    loops of public shapes on another pair (all steady, the interval not refitted): steady 166
    of 179 and 182 of 217."""
    from advisor import predict as pr

    model = pr.load_model()
    steady_only = {k: v for k, v in model.items() if k != pr.UNSTEADY_INTERVAL}
    # with the helper's cost counted per name it is handed (refitted): full_iteration 68, 82 and 83 of
    # 96; with five loops of a seeded draw (refitted, 2026-12-01): 70, 84 and 85 of 98; with eight
    # loops of a second draw in three processes a scope (refitted, later that day): 75, 88 and 89 of 104;
    # with eight more the next day (refitted): 79, 91 and 95 of 110 (the interval before the refit held
    # 20 of those 24 processes); with eight more in a later session (refitted): 85, 97 and 101 of 119
    # (before the refit, 17 of those 24)
    for scope, before, after, held_out in (("full_iteration", [91, 125], [103, 125], (106, 125)),
                                           ("fwd_bwd", [37, 54], [50, 54], (49, 54))):
        assert unseen.interval_by_regime(steady_only, scope)["tiny or short"] == before
        regimes = unseen.interval_by_regime(model, scope)
        assert regimes["tiny or short"] == after
        assert regimes["steady"] == unseen.interval_by_regime(steady_only, scope)["steady"]   # untouched
        assert unseen.unsteady_interval_held_out(model, scope) == held_out
        residuals = sorted(r for _, r in unseen.unsteady_residuals(model, scope))
        n = len(residuals)   # k-th smallest, k = floor((n+1) / 10) and ceil(9 (n+1) / 10)
        low, high = residuals[max((n + 1) // 10, 1) - 1], residuals[min(-(-9 * (n + 1) // 10), n) - 1]
        assert model[pr.UNSTEADY_INTERVAL][scope] == pytest.approx([low, high], rel=1e-9)
        assert low < 0 < high and high > -low   # measured above the prediction more than below
    assert unseen.interval_by_regime(model, "full_iteration")["steady"] == [238, 268]
    assert unseen.interval_by_regime(model, "fwd_bwd")["steady"] == [263, 334]
