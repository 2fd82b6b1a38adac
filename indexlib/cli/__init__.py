"""The front ends: ``python -m indexlib`` (``main``), its reports (``report``), and the tools that read one file
(``dump``, ``lookup``).

Imports anything of indexlib."""
