"""`--html`, `--perfetto` and `cg-advise report` through click's CliRunner, on the real sample
traces: exact messages and exit codes, a self-contained page, and the events and gaps drawn
checked against plain SQL on the export."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from conftest import ROOT, sample, sql

TUNE_RESULT = ROOT / "bench" / "workloads" / "zoo_scripts" / "zoo_plain.py.cg-advise.json"   # real, H100


def run(*args):
    result = CliRunner().invoke(cli, [*map(str, args)])
    return result.exit_code, result.stdout, result.stderr


def mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.2f} MB"


def test_analyze_writes_both_files_and_says_so(tmp_path):
    page, trace = tmp_path / "r.html", tmp_path / "r.json"
    plain = run("analyze", sample("zoo_mlp_profiled"))
    code, out, err = run("analyze", sample("zoo_mlp_profiled"), "--html", page, "--perfetto", trace)
    assert code == 1 and out == plain[1]            # launch-bound: findings; the console report unchanged
    drawn = sum(e["ph"] == "X" and e["cat"] not in ("iteration", "gap")
                for e in json.loads(trace.read_text())["traceEvents"])
    assert err == (f"cg-advise: wrote {page} ({mb(page)})\n"
                   f"cg-advise: wrote {trace} ({drawn} events, {mb(trace)}; open it in ui.perfetto.dev)\n")
    assert page.stat().st_size < 3_000_000


def test_existing_output_is_refused_without_force(tmp_path):
    page = tmp_path / "r.html"
    page.write_text("mine")
    code, out, err = run("analyze", sample("launch_eager"), "--html", page)
    assert (code, out, err) == (2, "", f"cg-advise: error: --html {page}: exists; pass --force to replace it\n")
    assert page.read_text() == "mine"
    code, _, err = run("analyze", sample("launch_eager"), "--html", page, "--force")
    assert code == 1 and page.read_text().startswith("<!DOCTYPE html>")
    code, out, err = run("analyze", sample("launch_eager"), "--perfetto", tmp_path)
    assert (code, err) == (2, f"cg-advise: error: --perfetto {tmp_path}: is a folder; give the file's name\n")


def test_page_is_self_contained_and_small(tmp_path):
    for name in ("zoo_mlp_profiled", "compute_eager", "launch_graphed", "cli_ddp2", "launch_graphed_node"):
        page = tmp_path / f"{name}.html"
        code, _, _ = run("analyze", sample(name), "--html", page)
        assert code in (0, 1)
        html = page.read_text()
        assert not re.search(r"""(src|href)\s*=|<link|@import|url\(""", html)   # nothing fetched
        assert html.count("<svg") >= 6 and "<script>" in html
        assert page.stat().st_size < 3_000_000, name


def _plot(html: str):
    plot = re.search(r'<svg class="plot"[^>]*data-start-ns="(\d+)" data-end-ns="(\d+)">(.*?)</svg>', html, re.S)
    return int(plot.group(1)), int(plot.group(2)), plot.group(3)


@pytest.mark.parametrize("name", ["zoo_mlp_profiled", "compute_eager", "launch_graphed"])
def test_timeline_draws_every_gpu_operation_of_its_window(tmp_path, name):
    page = tmp_path / "r.html"
    run("analyze", sample(name), "--html", page)
    start, end, plot = _plot(page.read_text())
    kernels = sql(sample(name), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start < ? AND end > ?",
                  end, start)[0][0]
    graphs = sql(sample(name), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE start < ? AND end > ?",
                 end, start)[0][0] if name == "launch_graphed" else 0
    assert plot.count('class="ek"') == kernels and plot.count('class="eg"') == graphs
    assert kernels + graphs > 0
    calls = sql(sample(name), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE start < ? AND end > ?",
                end, start)[0][0]
    assert sum(plot.count(f'class="{c}"') for c in ("cl", "cg", "cs", "cc")) == calls


def test_timeline_marks_the_host_syncs(tmp_path):
    page = tmp_path / "r.html"
    run("analyze", sample("sync_eager"), "--html", page)
    start, end, plot = _plot(page.read_text())
    names = sql(sample("sync_eager"), "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                "ON s.id = r.nameId WHERE r.start < ? AND r.end > ?", end, start)
    blocking = {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
    syncs = sum(re.sub(r"_v\d+$", "", name) in blocking for (name,) in names)
    assert syncs > 0 and plot.count('class="cs"') == syncs


def test_kernel_shares_in_the_page_match_sql(tmp_path):
    page = tmp_path / "r.html"
    run("analyze", sample("zoo_mlp_profiled"), "--html", page)
    html = page.read_text()
    durations = [d for (d,) in sql(sample("zoo_mlp_profiled"), "SELECT end - start FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    under10 = sum(d < 10_000 for d in durations) / len(durations)
    under50 = sum(d < 50_000 for d in durations) / len(durations)
    assert f"{len(durations)} kernels" in html
    assert f"{under10:.0%} under 10 us, {under50:.0%} under 50 us" in html


def _union_gaps(path, windows):
    """Idle gaps between the union of all GPU operations, those starting inside a window:
    plain Python over plain SQL."""
    rows = []
    for table in ("KERNEL", "MEMCPY", "MEMSET", "GRAPH_TRACE"):
        if sql(path, "SELECT count(*) FROM sqlite_master WHERE name = ?", f"CUPTI_ACTIVITY_KIND_{table}")[0][0]:
            rows += sql(path, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{table}")
    rows.sort()
    gaps, reach = [], rows[0][1]
    for s, e in rows[1:]:
        if s > reach:
            gaps.append((reach, s))
        reach = max(reach, e)
    return [(a, b) for a, b in gaps if any(w0 <= a < w1 for w0, w1 in windows)]


@pytest.mark.parametrize("name", ["zoo_mlp_profiled", "compute_eager"])
def test_perfetto_trace_matches_the_export(tmp_path, name):
    out = tmp_path / "t.json"
    code, analysis_json, _ = run("analyze", sample(name), "--json", "--perfetto", out)
    trace = json.loads(out.read_text())          # valid JSON
    events = trace["traceEvents"]
    assert {e["ph"] for e in events} == {"X", "M"}
    iterations = json.loads(analysis_json)["groups"][0]["iterations"]
    windows = [(it["gpu_start_ns"], it["gpu_start_ns"] + round(it["gpu_period_ms"] * 1e6)) for it in iterations]
    lo, hi = trace["otherData"]["window_start_ns"], trace["otherData"]["window_end_ns"]
    assert trace["otherData"]["left_out"] == {}
    kernels = sorted((e["args"]["start_ns"], e["args"]["end_ns"]) for e in events if e.get("cat") == "kernel")
    assert kernels == sorted(sql(sample(name), "SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                               "WHERE start < ? AND end > ?", hi, lo))
    for e in events:
        if e["ph"] == "X":   # ts and dur in us from the window start
            assert e["ts"] == pytest.approx((e["args"]["start_ns"] - lo) / 1e3, abs=1e-3)
            assert e["dur"] == pytest.approx((e["args"]["end_ns"] - e["args"]["start_ns"]) / 1e3, abs=1e-3)
    shown = [e for e in events if e.get("cat") == "iteration"]
    assert len(shown) == len(iterations)
    assert [e["args"]["start_ns"] for e in shown] == [w[0] for w in windows]
    gaps = sorted((e["args"]["start_ns"], e["args"]["end_ns"]) for e in events if e.get("cat") == "gap")
    expected = _union_gaps(sample(name), windows)
    assert len(gaps) == len(expected)
    assert sum(b - a for a, b in gaps) == pytest.approx(sum(b - a for a, b in expected), rel=1e-9)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"iterations", "GPU idle (gaps inside iterations)"} <= names


def test_report_combines_a_profile_and_a_tune_result(tmp_path):
    page = tmp_path / "r.html"
    code, out, err = run("report", sample("zoo_mlp_profiled"), TUNE_RESULT, "-o", page)
    assert (code, out, err) == (0, "", f"cg-advise: wrote {page} ({mb(page)})\n")
    html = page.read_text()
    tune = json.loads(TUNE_RESULT.read_text())
    assert 'id="timeline"' in html and 'id="tune"' in html
    winner = next(r for r in tune["rows"] if r["scope"] == tune["winner"])
    assert f"{tune['eager_ms'] / winner['ms_per_iter']:.2f}x" in html       # measured speedup of the winner
    assert html.count('class="meas"') == sum(1 for r in tune["rows"] if r.get("speedup"))
    assert '<tr class="win"><td>' + tune["winner"] in html
    assert '<pre class="diff">' in html and "torch.cuda.graph" in html       # the winner's patch


def test_report_of_a_tune_result_alone(tmp_path):
    page = tmp_path / "r.html"
    code, _, _ = run("report", TUNE_RESULT, "-o", page)
    html = page.read_text()
    assert code == 0 and 'id="tune"' in html and 'id="timeline"' not in html


def test_report_bad_inputs_are_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "cg-advise.analysis/2"}')
    page = tmp_path / "r.html"
    assert run("report", bad, "-o", page) == (2, "", f"cg-advise: error: {bad}: not a cg-advise tune result (schema "
                                                     "cg-advise.tune/1, from `cg-advise tune --json` or the "
                                                     "SCRIPT.cg-advise.json it saves)\n")
    assert run("report", sample("launch_eager"), sample("compute_eager"), "-o", page) == (
        2, "", f"cg-advise: error: {sample('compute_eager')}: a second profile ({sample('launch_eager')} is the "
               "first): give one profile and one tune result at most\n")
    assert run("report", tmp_path / "none.sqlite", "-o", page) == (
        2, "", f"cg-advise: error: {tmp_path / 'none.sqlite'}: no such file\n")
    assert not page.exists()


def test_the_cap_cuts_the_window_and_says_what_it_left_out():
    from advisor.analysis import analyse
    from advisor.html_report import render_html
    from advisor.timeline import build
    from advisor.trace import open_trace

    trace = open_trace(sample("zoo_mlp_profiled"))
    analysis = analyse(trace)
    whole = build(trace, analysis.main)
    capped = build(trace, analysis.main, max_events=100)
    assert capped.events <= 100 and capped.left_out and capped.start == whole.start and capped.end < whole.end
    # every event kept starts before the cut; kept and left out add up to the whole window
    assert all(e.start < capped.end for lane in capped.lanes for e in lane.events)
    kernels = sql(sample("zoo_mlp_profiled"), "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE start < ? "
                  "AND end > ?", capped.end, capped.start)[0][0]
    assert sum(e.kind == "kernel" for lane in capped.lanes for e in lane.events) == kernels
    assert capped.events + sum(capped.left_out.values()) <= whole.events
    html = render_html(analysis, capped)
    assert "The window was cut at the event cap: left out at least" in html
