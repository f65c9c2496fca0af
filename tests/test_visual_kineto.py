"""The HTML report and the Perfetto trace of a torch.profiler trace: the page is written (no
event-by-event timeline: that one is read again from an Nsight Systems export), the Chrome
trace is refused in one line (the input already is one)."""

from click.testing import CliRunner

from advisor.cli import cli
from conftest import TRACES

KINETO = str(TRACES / "kineto" / "mlp_launch.json.gz")


def test_html_of_a_torch_profiler_trace_has_no_timeline_but_every_other_section(tmp_path):
    page = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["analyze", KINETO, "--html", str(page)])
    assert result.exit_code == 1, result.output   # launch-bound: findings
    html = page.read_text()
    assert 'id="timeline"' not in html and "No event-by-event timeline" in html
    assert 'id="iterations"' in html and 'id="predictions"' in html


def test_perfetto_of_a_torch_profiler_trace_is_refused_in_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["analyze", KINETO, "--perfetto", str(tmp_path / "p.json")])
    assert result.exit_code == 2   # refused before any work: nothing but the one line
    assert result.output.strip().splitlines() == [
        "cg-advise: error: --perfetto: a torch.profiler trace is already a Chrome trace: open it in Perfetto as it is"]
    assert not (tmp_path / "p.json").exists()


def test_report_takes_a_torch_profiler_trace_as_the_profile(tmp_path):
    page = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", KINETO, "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert "torch.profiler (Kineto trace schema 1" in page.read_text()


def test_html_and_perfetto_never_name_one_file(tmp_path):
    same = tmp_path / "a.out"
    result = CliRunner().invoke(cli, ["analyze", str(TRACES / "launch_eager.sqlite"), "--html", str(same),
                                      "--perfetto", str(same)])
    assert result.exit_code == 2 and not same.exists()
    assert result.output.strip().splitlines() == [f"cg-advise: error: --html and --perfetto both name {same}: give two files"]
