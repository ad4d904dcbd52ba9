"""The runtime every exported package carries, copied byte for byte (as `<package>/_runtime/`).

Real modules rather than generated text, so they are linted and unit-tested here; they import
nothing from kernel_agent because an installed export must not need kernel-agent. What differs
per package (the kernel table, the entry points) is rendered from ../templates/.
"""
