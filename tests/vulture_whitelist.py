"""Names in src/attention_scaling that vulture finds unused because a library or Python itself
calls them by name. Read by vulture in tests/test_code_health.py, never imported."""

# Python's module __getattr__ (PEP 562): `attention_scaling.Explorer`, imported on first use
__getattr__
# Tornado's WebSocketHandler calls check_origin on each handshake
CappedWSHandler.check_origin
# Tornado's RequestHandler calls initialize with the route's arguments
NotServed.initialize
