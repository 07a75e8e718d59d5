"""Entry point for `panel serve app/explorer.py`: the same page as `attention-scaling serve`."""

from attention_scaling.page import create_page

create_page().servable()
