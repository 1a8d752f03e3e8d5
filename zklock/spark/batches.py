"""Exactly once for ``foreachBatch``: a batch function that names its writer appends each
batch once, however often Spark replays it after a crash.

Spark runs ``foreachBatch`` at least once: a batch whose function returned, but whose end
Spark had not recorded in the checkpoint when the driver died, runs again on restart. Delta
makes such writes idempotent with the writer options ``txnAppId`` and ``txnVersion``.
:func:`insert_once` does the same for zklock's plain tables (Parquet, ORC, Hive format)::

    from zklock.spark.batches import insert_once

    def write(batch_df, batch_id):
        insert_once(batch_df, "sales.orders", writer="orders-ingest", batch=batch_id)

    stream.writeStream.foreachBatch(write).option("checkpointLocation", ...).start()

One locked statement (X on the table, S on what the rows read) reads the writer's record
beside the table's files, appends the rows by column name, and records the batch, as a
streaming query's own batches into a table do (docs/spark.md, "Streams and pipelines";
zklock/spark/java/stream/InsertOnce.java). Classic sessions (py4j); a Spark Connect client
streams into the table by name (``toTable``), which is exactly once by itself. It is also
the way to stream into a Hive-format table, which Spark refuses as a stream's target.
"""

from __future__ import annotations

import enum
from typing import Any

from ..errors import UnsupportedStatement
from .lock_client import engine_class, lock_error
from .protocol import JvmClass


class BatchOutcome(enum.Enum):
    """What :func:`insert_once` did with a batch (TableBatches.Outcome in the JVM)."""

    #: Its rows were appended.
    WRITTEN = "WRITTEN"
    #: The table held the batch already (replayed after a crash): nothing was written.
    ALREADY_WRITTEN = "ALREADY_WRITTEN"
    #: Its append had been cut off while its files moved in: the rest were moved.
    FINISHED = "FINISHED"
    #: Its append into a Hive-format table had been cut off while Hive's load moved its
    #: files in: those moved were removed, and the batch written again.
    REWRITTEN = "REWRITTEN"


def insert_once(df: Any, table: str, *, writer: str, batch: int) -> BatchOutcome:
    """Append ``df``'s rows to ``table`` as batch ``batch`` of ``writer`` (1 to 128 letters,
    digits, ``.``, ``_``, ``-``), unless the table holds that batch, or a later one of the
    same writer, already. Locked, denied and lost as any statement (zklock's exceptions)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
        raise ValueError(f"zklock: a batch is a number from 0, not {batch!r}")
    if not hasattr(df, "_jdf"):
        raise UnsupportedStatement("zklock: insert_once runs in a classic session; a Spark"
                                   " Connect client streams into the table by name"
                                   " (writeStream...toTable), which zklock commits once")
    session = df.sparkSession
    entry = engine_class(session, JvmClass.INSERT_ONCE)
    try:
        outcome = entry.insert(session._jsparkSession, df._jdf, table, writer, batch)
    except Exception as exc:  # the engine's refusal, as zklock's exception
        converted = lock_error(exc)
        if converted is exc:
            raise
        raise converted from None
    return BatchOutcome(outcome)
