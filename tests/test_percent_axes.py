"""Percentage axes never repeat a tick label: every chart's percent axis that plotly scales to its data uses
common.PERCENT_AXIS (".3~%": as many decimals as the ticks need), not ".0%", which wrote "5% 5% 4%" for
ticks 0.2 points apart. Axes fixed to 0-100 % may keep whole percents."""
import re
from pathlib import Path

UI = Path(__file__).resolve().parents[1] / "bertlab" / "app" / "ui"


def test_no_percentage_axis_rounds_to_whole_percents():
    fixed = []
    for f in sorted(UI.glob("*.py")):
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"tickformat=\"\.0%\"", line) and "range=[0, 1]" not in line and "zmax=1" not in line:
                fixed.append(f"{f.name}:{n}")
    assert not fixed, f"axes that round to whole percents (repeated ticks on a narrow range): {fixed}"
