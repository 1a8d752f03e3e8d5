"""docs/deploy.md's spark-defaults.conf is real: every spark.zklock.* key in it (the commented
alternatives too) is a setting, and every value parses."""

from __future__ import annotations

from pathlib import Path

import deployed
from deployed import DOC

from zklock.config import SETTINGS, Settings


def spark_defaults() -> dict[str, str]:
    return deployed.spark_defaults(commented=True)


def test_every_zklock_key_is_a_setting_and_parses():
    conf = spark_defaults()
    keys = {s.spark for s in SETTINGS if s.spark}
    ours = {k: v for k, v in conf.items() if k.startswith("spark.zklock.")}
    assert len(ours) >= 8
    assert set(ours) <= keys, set(ours) - keys
    settings = Settings.resolve(spark_conf=ours, environ={})
    assert settings.hosts == "zk1:2181,zk2:2181,zk3:2181"
    assert (settings.retries, settings.retry_interval) == (100, 10.0)
    assert settings.node_naming == "hive" and settings.root == "/hive_zookeeper_namespace"


def test_the_committers_it_names_are_in_the_jvm_module():
    """Each class deploy.md names is a source of the JVM module at that name (its package
    is its folder: java/ is the package zklock)."""
    conf = spark_defaults()
    java = DOC.parents[1] / "zklock" / "spark" / "java"

    def source(name: str) -> Path:
        return java / (name.removeprefix("zklock.").replace(".", "/") + ".java")

    for key in ("spark.hadoop.mapred.output.committer.class", "spark.sql.extensions",
                "spark.plugins.defaultList"):
        assert source(conf[key]).is_file(), conf[key]
    # the commit protocol the engine extension makes the default (staging per write job)
    from zklock.spark.protocol import Conf, JvmClass

    text = DOC.read_text()
    assert f"{Conf.COMMIT_PROTOCOL}={JvmClass.COMMIT_PROTOCOL}" in text
    assert source(JvmClass.COMMIT_PROTOCOL).is_file()
