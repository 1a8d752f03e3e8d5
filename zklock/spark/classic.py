"""PySpark's classic (py4j) DataFrame class, wherever the installed PySpark keeps it.

PySpark 4 split ``pyspark.sql.dataframe.DataFrame`` into an API class and two
implementations, the classic one in ``pyspark.sql.classic`` and Spark Connect's; in PySpark
3.5 the API class *is* the classic one. This is the one place that knows.
"""

from __future__ import annotations

try:
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
except ImportError:  # PySpark 3.5
    from pyspark.sql.dataframe import DataFrame as ClassicDataFrame  # type: ignore[assignment]

__all__ = ["ClassicDataFrame"]
