# Plain `pytest` runs from the repository root get the same variant selection as Bazel runs.
pytest_plugins = ["tools.runner.session.plugin"]
