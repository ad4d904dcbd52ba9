"""Tests of kernel_agent/export: the runtime an exported package ships and the files an export writes."""
