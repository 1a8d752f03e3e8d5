#!/usr/bin/env bash
# Make sure a ZooKeeper server can run here: Debian's zookeeper package jars and a Java runtime.
set -euo pipefail
jars="${ZKLOCK_ZK_JARS:-/usr/share/java}"
if [ -n "${ZKLOCK_ZK:-}" ]; then
  echo "using ZooKeeper at ZKLOCK_ZK=$ZKLOCK_ZK"; exit 0
fi
if [ ! -f "$jars/zookeeper.jar" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian's zookeeper package (jars under /usr/share/java)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq zookeeper >/dev/null
  else
    echo "ZooKeeper is missing: install Debian's zookeeper package (sudo apt-get install zookeeper)" >&2
    echo "or point ZKLOCK_ZK at a running server." >&2
    exit 1
  fi
fi
if ! command -v java >/dev/null; then
  echo "java is missing: install a Java runtime 17+ (apt-get install openjdk-17-jre-headless)" >&2
  exit 1
fi
echo "ZooKeeper jars: $jars/zookeeper.jar"
