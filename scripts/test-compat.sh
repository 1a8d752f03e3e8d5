#!/usr/bin/env bash
# make test-compat: the Spark-facing tests on the oldest supported 3.5 and 4.0 (3.5.0, 4.0.0)
# and on the newest 4.x ("newest": .venv's, which pip picks within setup.cfg's bounds and
# `make test` runs the whole suite on; .ci/run leaves it out for that reason). One venv per
# older version under .venv-compat/, built once; the JVM module is compiled per Spark line
# (zklock/spark/jvm.py).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VERSIONS="${COMPAT_VERSIONS:-3.5.0 4.0.0 newest}"
TESTS=(tests/spark/test_spark_nodes.py tests/spark/test_spark_corpus.py
       tests/spark/test_spark_session.py tests/spark/test_spark_fail_closed.py
       tests/spark/test_spark_fenced_commit.py tests/spark/test_spark_engine.py
       tests/spark/test_spark_connect_server.py tests/spark/test_spark_versions.py
       tests/spark/test_engine_reads.py tests/spark/test_shared_metastore.py
       tests/spark/test_jvm.py tests/spark/test_lock_process.py tests/spark/test_local_cluster.py
       tests/spark/test_streams.py tests/cli/test_cli_spark.py)
for version in $VERSIONS; do
  venv=".venv-compat/pyspark-$version"
  [ "$version" = newest ] && venv="${VENV:-.venv}"  # built by `make install`
  if [ ! -f "$venv/.installed-stamp" ] || [ setup.cfg -nt "$venv/.installed-stamp" ]; then
    echo "== PySpark $version: installing into $venv"
    log=".zklock/install-pyspark-$version.log"  # pip's output, shown only if it fails
    mkdir -p .zklock
    pins=()  # PySpark 3.5's pandas API predates NumPy 2 (np.NaN), and so must PyArrow's build
    case "$version" in 3.*) pins=("numpy<2" "pyarrow<18") ;; esac
    if ! { { test -x "$venv/bin/python" || "$PYTHON" -m venv "$venv"; } &&
           "$venv/bin/python" -m pip install -q --upgrade pip &&
           "$venv/bin/python" -m pip install -q -e '.[test]' "pyspark[connect]==$version" \
             "${pins[@]}"; } > "$log" 2>&1; then
      cat "$log"
      echo "== PySpark $version: the install failed"
      exit 1
    fi
    touch "$venv/.installed-stamp"
  fi
  echo "== PySpark $version: $("$venv/bin/python" -c 'import pyspark; print(pyspark.__version__)')"
  started=$SECONDS
  # a base temp of its own, apart from `make test`'s (pytest prunes the numbered temp
  # directories it finds); two workers, as `make test`
  "$venv/bin/python" -m pytest -q -p no:cacheprovider --basetemp ".zklock/pytest-$version" \
    -n "${COMPAT_WORKERS:-2}" --dist loadfile "${TESTS[@]}"
  echo "== PySpark $version: passed in $((SECONDS - started)) s"
done
