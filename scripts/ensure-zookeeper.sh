#!/usr/bin/env bash
# Make sure a ZooKeeper server can run here, and zklock's JVM module be compiled: ZooKeeper's
# jars (Debian's zookeeper package, or ZKLOCK_ZK_JARS: a directory such as PySpark's jars/,
# `make ... ZOOKEEPER=pyspark`) and a JDK 17+ (java, and javac for the editable install).
set -euo pipefail
jars="${ZKLOCK_ZK_JARS:-/usr/share/java}"
if [ -n "${ZKLOCK_ZK:-}" ]; then
  echo "using ZooKeeper at ZKLOCK_ZK=$ZKLOCK_ZK"; exit 0
fi
install() {  # install DESCRIPTION PACKAGE: with apt-get as root, else say what to install
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing $1 (apt-get install $2)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "$2" >/dev/null
  else
    echo "$1 is missing: sudo apt-get install $2" >&2
    exit 1
  fi
}
found=$(ls "$jars"/zookeeper.jar "$jars"/zookeeper-[0-9]*.jar 2>/dev/null | head -n 1 || true)
if [ -z "$found" ]; then
  [ -z "${ZKLOCK_ZK_JARS:-}" ] || { echo "no ZooKeeper jar under ZKLOCK_ZK_JARS=$jars" >&2; exit 1; }
  install "ZooKeeper (Debian's zookeeper package, jars under /usr/share/java)" zookeeper
  found="$jars/zookeeper.jar"
fi
jdk="${JAVA_HOME:+$JAVA_HOME/bin/}"  # as zklock finds them: $JAVA_HOME/bin, else the PATH
if ! command -v "${jdk}javac" >/dev/null || ! command -v "${jdk}java" >/dev/null; then
  install "a JDK 17+ (java and javac)" openjdk-17-jdk-headless
fi
echo "ZooKeeper jars: $found"
