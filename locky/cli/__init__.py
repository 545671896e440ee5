"""The operator's command line: ``locky serve``, ``spec``, ``grant-admin``, ``plugins``."""
