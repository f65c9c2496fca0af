"""`cg-advise analyze` through click's CliRunner: exact messages and exit codes."""

import json
import shutil
import sqlite3

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from conftest import TRACES, rewrite, sample, sql


def run(*args, env=None):
    result = CliRunner().invoke(cli, ["analyze", *map(str, args)], env=env)
    return result.exit_code, result.stdout, result.stderr


def test_json_has_the_documented_fields():
    code, out, err = run(sample("launch_eager"), "--json")
    assert code == 1 and err == ""  # launch-bound is a finding
    data = json.loads(out)
    assert data["schema"] == "cg-advise.analysis/2"
    s = data["summary"]
    for key in ("iterations", "kernels_per_iteration", "gpu_busy_ms_per_iteration", "gpu_period_ms",
                "gpu_utilization", "verdict"):
        assert key in s
    assert s["iterations"] == 40 and s["verdict"] == "launch-bound" and 0 <= s["gpu_utilization"] <= 1
    assert data["trace"]["nsys_version"] == sql(sample("launch_eager"),
        "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_PRODUCT_VERSION'")[0][0]
    assert data["trace"]["export_schema_version"] == "3.20.3"
    assert len(data["groups"]) == 1 and len(data["groups"][0]["iterations"]) == 40


def test_gpu_bound_run_exits_zero_and_names_versions():
    code, out, err = run(sample("compute_eager"))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].endswith("nsys 2025.3.2.0, export schema 3.20.3, graph trace: none")
    assert lines[1] == "process 476 (python3) on GPU 0 (NVIDIA H200)"
    assert lines[2] == "iterations: 20 from injected range 'cg-advise:iteration'"
    assert lines[3] == "verdict: gpu-bound"


BAD = [
    ("missing.sqlite", "{p}: no such file"),
    ("text", "{p}: not an SQLite file (expected an export from `nsys export --type sqlite`) nor a torch.profiler "
             "trace (.json, .json.gz)"),
    ("truncated", "{p}: unreadable SQLite file (database disk image is malformed); is it truncated or corrupt?"),
    ("other_db", "{p}: an SQLite file, but not an Nsight Systems export (none of its tables: META_DATA_EXPORT, "
                 "CUPTI_ACTIVITY_KIND_*, StringIds, TARGET_INFO_GPU)"),
    ("nvtx_only", "nvtx_only.sqlite: no CUDA activity in this export (NVTX or CPU data only); "
                  "profile with `-t cuda,nvtx` and an nsys that traces the CUDA runtime"),
]


def make_bad(kind, tmp_path):
    path = tmp_path / f"{kind}.sqlite"
    if kind == "text":
        path.write_text("not a database\n")
    elif kind == "truncated":
        path.write_bytes(sample("launch_eager").read_bytes()[:20000])
    elif kind == "other_db":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE t (x)")
        conn.commit()
        conn.close()
    elif kind == "nvtx_only":
        shutil.copy(sample("nvtx_only"), path)
    return path


@pytest.mark.parametrize("kind,message", BAD)
def test_bad_input_is_one_line_exit_2(kind, message, tmp_path):
    path = make_bad(kind, tmp_path)
    code, out, err = run(path)
    assert code == 2 and out == ""
    assert err == f"cg-advise: error: {message.format(p=path)}\n"


def test_corrupt_pages_are_one_line(tmp_path):
    data = bytearray(sample("launch_eager").read_bytes())
    data[4096 * 3: 4096 * 40] = b"\xff" * (4096 * 37)  # wipe table pages in the middle
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(bytes(data))
    code, out, err = run(path)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"cg-advise: error: {path}: ")


def test_pattern_that_matches_nothing():
    code, out, err = run(sample("launch_eager"), "--iteration-range", "^step$")
    assert code == 2 and out == ""
    assert err == ("cg-advise: error: --iteration-range '^step$' matches no NVTX range in launch_eager.sqlite "
                   "(ranges found: 'cg-advise:forward', 'cg-advise:iteration', 'cg-advise:module:body', "
                   "'cg-advise:module:head', 'cg-advise:module:stem', 'cg-advise:module:wide')\n")


def test_invalid_pattern():
    code, _, err = run(sample("launch_eager"), "--iteration-range", "(")
    assert code == 2
    assert err.startswith("cg-advise: error: --iteration-range '(' is not a valid regular expression")


def test_nsys_rep_without_nsys_says_how_to_export(tmp_path):
    rep = tmp_path / "nvtx_only.nsys-rep"
    shutil.copy(TRACES / "reports" / "nvtx_only.nsys-rep", rep)
    code, out, err = run(rep, env={"NSYS": str(tmp_path / "no-nsys"), "PATH": ""})
    assert code == 3 and out == ""
    assert err == (f"cg-advise: error: cannot read nvtx_only.nsys-rep without nsys (nsys not found at "
                   f"{tmp_path / 'no-nsys'}: install Nsight Systems (https://developer.nvidia.com/nsight-systems, "
                   "or the `nsight-systems` package of the CUDA apt repository), or pass --nsys PATH / set $NSYS); "
                   "or export it elsewhere with `nsys export --type sqlite nvtx_only.nsys-rep` and pass the .sqlite\n")


def test_nsys_rep_uses_its_fresh_export_and_refuses_a_stale_one(tmp_path):
    rep = tmp_path / "launch_eager.nsys-rep"
    shutil.copy(TRACES / "reports" / "launch_eager.nsys-rep", rep)
    export = tmp_path / "launch_eager.sqlite"
    shutil.copy(sample("launch_eager"), export)
    code, out, _ = run(rep, "--json")
    assert code == 1 and json.loads(out)["summary"]["iterations"] == 40
    import os

    os.utime(export, (1, 1))  # older than the report now
    code, out, err = run(rep)
    assert code == 2 and out == ""
    assert err == (f"cg-advise: error: {export} is older than launch_eager.nsys-rep: pass --reexport to export "
                   "again (the old file is kept as launch_eager.sqlite.bak)\n")


def test_older_schema_names_are_read(copy_sample):
    """The 2022.x layout: EXPORT_META_DATA, NVTX text inline (no textId), no graph columns."""
    path = copy_sample("launch_eager")
    rewrite(path, """
        ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA;
        UPDATE NVTX_EVENTS SET text = (SELECT value FROM StringIds WHERE id = NVTX_EVENTS.textId)
            WHERE textId IS NOT NULL;
        ALTER TABLE NVTX_EVENTS DROP COLUMN textId;
        ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN graphNodeId;
        ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN greenContextId;
        ALTER TABLE CUPTI_ACTIVITY_KIND_MEMCPY DROP COLUMN graphNodeId;
        ALTER TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION DROP COLUMN eventSyncId;
    """)
    _, new, _ = run(path, "--json")
    _, old, _ = run(sample("launch_eager"), "--json")
    new, old = json.loads(new), json.loads(old)
    assert new["summary"] == old["summary"]
    assert new["groups"][0]["ranges"] == old["groups"][0]["ranges"]


def test_pre_2021_layout_without_export_metadata_is_read(copy_sample):
    """nsys before about 2021: no META_DATA_EXPORT / EXPORT_META_DATA table, the GPU's id in
    TARGET_INFO_GPU.deviceId, its name only in TARGET_INFO_CUDA_GPU; the same figures."""
    path = copy_sample("launch_eager")
    rewrite(path, """
        DROP TABLE META_DATA_EXPORT;
        DROP TABLE META_DATA_CAPTURE;
        CREATE TABLE TARGET_INFO_CUDA_GPU AS SELECT id AS deviceId, name FROM TARGET_INFO_GPU;
        ALTER TABLE TARGET_INFO_GPU RENAME COLUMN id TO deviceId;
        UPDATE TARGET_INFO_GPU SET name = NULL;
    """)
    code, new, err = run(path, "--json")
    _, old, _ = run(sample("launch_eager"), "--json")
    new, old = json.loads(new), json.loads(old)
    assert code == 1 and err == ""
    assert new["summary"] == old["summary"] and new["summary"]["gpu"] == "NVIDIA H200"
    assert new["trace"]["export_schema_version"].startswith("unknown (no export metadata")


def test_an_old_export_without_cuda_is_told_so_not_refused_as_foreign(tmp_path):
    path = tmp_path / "nvtx_only_old.sqlite"
    shutil.copy(sample("nvtx_only"), path)
    rewrite(path, "DROP TABLE META_DATA_EXPORT;")
    code, out, err = run(path)
    assert code == 2 and err.startswith("cg-advise: error: nvtx_only_old.sqlite: no CUDA activity in this export")


def test_a_repeated_range_without_gpu_work_is_not_taken_for_the_iterations(copy_sample):
    """pyprof-style exports: a repeated range of start-up copies covers the most time but
    launches no kernel; the iterations are the next candidate, and the report names both."""
    path = copy_sample("launch_eager")
    rewrite(path, """
        INSERT INTO StringIds (id, value) VALUES (900001, 'train step'), (900002, 'copy parameters');
        UPDATE NVTX_EVENTS SET textId = 900001
            WHERE textId = (SELECT id FROM StringIds WHERE value = 'cg-advise:iteration');
        DELETE FROM NVTX_EVENTS WHERE textId IN (SELECT id FROM StringIds WHERE value LIKE 'cg-advise:%');
        INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, textId)
            SELECT MIN(start) - 20000000000 + k * 6000000000, MIN(start) - 15000000000 + k * 6000000000, 59,
                   MIN(globalTid), 900002
            FROM NVTX_EVENTS, (SELECT 0 AS k UNION ALL SELECT 1) GROUP BY k;
    """)
    _, out, _ = run(path, "--json")
    summary = json.loads(out)["summary"]
    assert summary["iteration_source"] == "repeated top-level range 'train step'" and summary["iterations"] == 40
    considered = summary["iteration_candidates"]
    assert [c["range"] for c in considered] == ["copy parameters", "train step"]
    assert considered[0]["gpu_share"] == 0 and considered[1]["gpu_share"] > 0.5
    _, text, _ = run(path)
    flat = " ".join(text.split())   # the console wraps long lines
    assert "ranges considered (share of GPU time their calls launch; a range must launch half and be one training " \
           "step): 'copy parameters' 0%, 'train step' " in flat


@pytest.mark.parametrize("name", [p.stem for p in sorted(TRACES.glob("*.sqlite")) if p.stem != "nvtx_only"])
def test_a_verdict_never_contradicts_its_own_figures(name):
    """launch-bound means the GPU waits on the CPU: never beside a queue that runs ahead."""
    _, out, _ = run(sample(name), "--json")
    for group in json.loads(out)["groups"]:
        s = group["summary"]
        if s["verdict"] == "launch-bound":
            assert s["launch_to_start_median_us"] < 50 and s["gpu_utilization"] < 0.9
        if s["launch_to_start_median_us"] >= 50 and s["gpu_utilization"] < 0.9:
            assert s["verdict"] in ("gpu-bound", "sync-bound", "graphed")


def test_no_kernel_is_nothing_to_analyse(copy_sample):
    """One rule, one exit code: copies and memsets alone are nothing to analyse."""
    path = copy_sample("launch_eager")
    rewrite(path, "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;")
    code, out, err = run(path)
    assert code == 2 and out == ""
    assert err.startswith("cg-advise: error: launch_eager.sqlite: nothing to analyse: no kernel ran in this export (")


def test_a_program_that_is_not_pytorch_gets_no_scope_advice(copy_sample):
    """A plain CUDA program (no PyTorch kernel names, no cg-advise ranges): metrics, no advice."""
    path = copy_sample("launch_eager")
    rewrite(path, """
        DELETE FROM NVTX_EVENTS;
        UPDATE StringIds SET value = 'my_kernel_' || id WHERE value LIKE '%at::%' OR value LIKE '%c10::%';
    """)
    _, out, _ = run(path, "--json")
    analysis = json.loads(out)
    assert analysis["trace"]["pytorch"] is False
    assert analysis["predictions"]["note"].startswith("not a PyTorch process")
