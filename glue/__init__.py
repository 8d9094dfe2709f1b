"""The DECICE framework side: workflows to DeciceJobs and back, and the ``decice`` CLI.

Importing ``glue`` stays cheap: the Kubernetes client is imported only by the
names that need it.
"""
