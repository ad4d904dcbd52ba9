"""From a model to its ranked, verified kernel list (`kernel-agent regions`): capture, regions, problems, ranks."""
