"""No percentage axis shows the same tick label twice (issue 31, item 1: the Race chart's y-axis read
"5% 5% 5% 4% 4%", so the gap between recipes could not be read), and no log axis labels a tick with
anything but its value (issue 42, item 6: plotly writes a bare "5" under 50 and "2" under 200). Every
tab is opened as a student would, and every plotly axis it draws is read."""
import pytest
from browser import DESKTOP, WAIT_MS, chromium_page
from test_browser_shell import TABS

AXES_JS = """() => [...document.querySelectorAll('[role=tabpanel] .js-plotly-plot')].filter(p => p.offsetParent)
  .flatMap(p => [...p.querySelectorAll('.xaxislayer-above, .yaxislayer-above')].map(layer =>
    [...layer.querySelectorAll('.xtick text, .ytick text')].map(t => t.textContent)))"""

# each log axis's ticks whose label is not their value: (axis title, label, value); d3 keeps a tick's
# datum on its element: x is log10 of the value on a log axis
LOG_JS = r"""() => {
  const SI = {k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, m: 1e-3, "µ": 1e-6, "μ": 1e-6, n: 1e-9};
  const value = t => {
    const s = t.replace(/<[^>]*>/g, "").replace(/\u2212/g, "-").replace(/[%,\s]/g, "");
    const m = s.match(/^(-?[0-9.]+(?:e[-+]?[0-9]+)?)([kMGTPmµμn]?)$/);
    return m ? parseFloat(m[1]) * (SI[m[2]] || 1) : null;
  };
  const out = [];
  for (const p of document.querySelectorAll("[role=tabpanel] .js-plotly-plot")) {
    if (!p.offsetParent || !p._fullLayout) continue;
    for (const [name, ax] of Object.entries(p._fullLayout)) {
      if (!/^[xy]axis\d*$/.test(name) || ax.type !== "log") continue;
      const letter = name[0];
      for (const t of p.querySelectorAll(`.${letter}tick`)) {
        const d = t.__data__, v = d && value(d.text || "");
        if (!d || v === null || !(v > 0)) continue;
        if (Math.abs(Math.log10(v) - d.x) > 0.01) out.push([(ax.title && ax.title.text) || name, d.text, 10 ** d.x]);
      }
    }
  }
  return out;
}"""


@pytest.mark.slow
def test_no_percentage_axis_repeats_a_tick_label(server):
    with chromium_page(DESKTOP) as (browser, page, outside, errors):
        page.goto(server)
        page.locator("#model-card").get_by_text("default (shipped)").wait_for(timeout=WAIT_MS)
        seen, logs, wrong = [], 0, []
        for name in TABS:
            page.get_by_role("tab", name=name).click()
            page.wait_for_timeout(4000)  # the tab draws as it opens
            for ticks in page.evaluate(AXES_JS):
                if ticks and all(t.endswith("%") for t in ticks):
                    seen.append((name, ticks))
                    assert len(set(ticks)) == len(ticks), (name, ticks)
            logs += page.evaluate("() => [...document.querySelectorAll('[role=tabpanel] .js-plotly-plot')]"
                                  ".filter(p => p.offsetParent && p._fullLayout).flatMap(p => Object.entries("
                                  "p._fullLayout)).filter(([k, a]) => /^[xy]axis\\d*$/.test(k) && a.type === 'log').length")
            wrong += [(name, *w) for w in page.evaluate(LOG_JS)]
        print(seen, logs)
        assert len(seen) >= 2, seen  # the Masking lab's and Fill-mask's at least: the test reads some
        assert logs >= 3, logs  # Architecture's and Scaling's log axes at least
        assert not wrong, f"log-axis ticks labelled with something else than their value: {wrong}"
    assert not errors, errors
