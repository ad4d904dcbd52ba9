"""The in-process inner loop (`pytest -m "not e2e"`), one folder per stage of kernel_agent/.

Packages, so that tests/unit/<stage>/test_<module>.py may repeat a name used by another stage or by tests/e2e/.
"""
