"""The code the sandboxed process runs: the worker's request loop, loading and calling the candidate.

It runs beside hostile code, so the trusted side never imports it; both sides share `sandbox.protocol` only.
"""
