"""The Spark jobs of kafka-index-rebuild (verify, rebuild, repair), their configuration, the Delta audit
table and the ``kafka-index`` command line. All index logic lives in :mod:`indexlib`."""
