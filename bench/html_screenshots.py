"""Screenshots of the HTML report for the README: a launch-bound, a gpu-bound and a graphed
sample trace (the launch-bound one with its real tune result), rendered by headless Chromium.

    python bench/html_screenshots.py [--out docs] [--chromium /usr/bin/chromium]

Needs playwright (pip install -e '.[browser]') and a Chromium (Debian: apt-get install chromium);
Pillow, where installed, quantizes the PNGs to 256 colours (each under 300 KB).
Prints each page's size: the evidence for "small enough to attach to a ticket".
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = {   # screenshot name -> cg-advise arguments (paths relative to the checkout: the page shows them)
    "report_launch_bound": ["report", "sample_traces/zoo_mlp_profiled.sqlite",
                            "bench/workloads/zoo_scripts/zoo_plain.py.cg-advise.json", "-o", "{out}"],
    "report_gpu_bound": ["analyze", "sample_traces/compute_eager.sqlite", "--html", "{out}"],
    "report_graphed": ["analyze", "sample_traces/launch_graphed.sqlite", "--html", "{out}"],
}


def shrink(png: Path) -> None:
    """A 256-colour palette keeps a page screenshot readable at a third of its size (the
    README's images stay under 300 KB); needs Pillow, else the PNG is kept as taken."""
    try:
        from PIL import Image
    except ImportError:
        print("Pillow not installed: screenshots kept unquantized", file=sys.stderr)
        return
    with Image.open(png) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs"))
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument("--width", type=int, default=1100)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": args.width, "height": 900})
        for name, command in PAGES.items():
            html = Path(tmp) / f"{name}.html"
            argv = [str(a).replace("{out}", str(html)) for a in command]
            subprocess.run([sys.executable, "-m", "advisor.cli", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                           check=False)
            page.goto(html.as_uri())
            page.wait_for_load_state("load")
            shot = out / f"{name}.png"
            page.screenshot(path=str(shot), full_page=True)
            shrink(shot)
            print(f"{name}: {' '.join(argv[:2])}: page {html.stat().st_size / 1e6:.2f} MB, "
                  f"screenshot {shot.stat().st_size / 1e3:.0f} KB")
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
