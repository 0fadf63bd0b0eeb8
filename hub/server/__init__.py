"""The server side of the ``gem_env`` OpenEnv package: ``server.app:app``."""
