# The plugin is loaded through its pytest11 entry point (pip install -e .); pytester is for tests/.
pytest_plugins = ["pytester"]
