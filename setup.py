"""The one compiled part: ``indexlib.format._kernel`` (C, built with the machine's compiler by ``pip install``).

``optional=True``: on a machine without a C compiler the install still succeeds and ``indexlib`` uses
its pure-Python scan (slower; one warning). Everything else is in ``pyproject.toml``.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "indexlib.format._kernel",
            ["indexlib/format/_kernel.c"],
            depends=["indexlib/format/_crc32c.h"],
            extra_compile_args=["-O3", "-std=c11", "-pthread", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            extra_link_args=["-pthread"],
            optional=True,
        )
    ]
)
