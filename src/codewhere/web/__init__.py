"""`codewhere serve`: the local web page (app.py) and its call-graph picture (graph_svg.py)."""
