"""The code the sandboxed process runs: the worker's request loop, loading and calling the candidate.

It runs beside hostile code, so the trusted side never imports it (the host starts the worker by its module's
name); it imports of the trusted side only what both share: `sandbox.protocol`, `channel`, `tensors` and
the device path's transport (`tests/unit/sandbox/test_layers.py`).
"""
