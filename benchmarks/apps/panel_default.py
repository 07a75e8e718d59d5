"""Default Panel behaviour: the same update in a plain Panel app, with no tuning at all.

A pn.widgets.IntSlider and the same Charts in Bokeh panes; a watcher recomputes and
updates. Panel's defaults apply: its 50 ms debounce of browser changes, its dispatch of
server changes, Nagle's algorithm on the websocket.
"""

import panel as pn

from attention_scaling import core
from attention_scaling.figures import Charts

values = list(core.D_K_VALUES)
charts = Charts()
slider = pn.widgets.IntSlider(name="Head width d_k", start=0, end=len(values) - 1,
                              value=values.index(64))


def refresh(*_events) -> None:
    charts.update(core.compute_state(values[slider.value], 1.0, 2288), True)


slider.param.watch(refresh, "value")
refresh()
pn.Column(slider, pn.Row(pn.pane.Bokeh(charts.scaled_fig), pn.pane.Bokeh(charts.unscaled_fig)),
          pn.pane.Bokeh(charts.jacobian_fig), pn.pane.Bokeh(charts.diagonal_fig)).servable()
